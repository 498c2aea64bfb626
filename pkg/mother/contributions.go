package mother

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/nest"
	"github.com/mother-chat/mother/pkg/prompt"
	"github.com/mother-chat/mother/pkg/skills"
)

var _ nest.Contributions = (*Mother)(nil)

// skillsMu serialises skill installs, so two chicks proposing the same
// skill do not interleave their files.
var skillsMu sync.Mutex

// ProposeSkill takes a skill a chick created or changed: validated, it is
// written to the chick's channel's skills/ (or the workspace's, for a
// chick an admin spawned for that) and a one-line summary is posted and
// logged in the channel; a refusal is posted and returned with the
// reason. An identical skill is accepted silently.
func (m *Mother) ProposeSkill(_ context.Context, in hatchery.Info, p skills.Proposal) (bool, string, error) {
	a, ok := m.Adapter(in.Adapter)
	if !ok {
		return false, "refused: this chick's chat adapter is not configured", nil
	}
	dir, where := filepath.Join(in.ChannelDir, "skills"), "this channel's skills"
	if in.SkillsTo == hatchery.SkillsToWorkspace {
		dir, where = filepath.Join(m.store.Workspace(), "skills"), "the workspace's skills (every channel)"
	} else if in.ChannelDir == "" {
		return false, "refused: this chick has no channel directory", nil
	}
	s, err := skills.Validate(p)
	if err != nil {
		msg := fmt.Sprintf("Skill %s from chick %s refused: %s.", tame(p.Name, 80), in.ID, tame(err.Error(), 300))
		m.logger.Warn("chick skill refused", "chick", in.ID, "skill", oneLine(p.Name, 80), "err", err)
		if m.paceNotice(in, noticeSkillRefused, p.Name) {
			_ = m.postLogged(a, in.ChannelID, "📚 "+msg, "")
		}
		return false, msg, nil
	}
	skillsMu.Lock()
	err = skills.CheckCaps(dir, where, s, m.skillCaps())
	var change skills.Change
	if err == nil {
		change, err = skills.Install(dir, s)
	} else {
		err = &capError{err}
	}
	skillsMu.Unlock()
	var capErr *capError
	if errors.As(err, &capErr) {
		msg := fmt.Sprintf("Skill %s from chick %s refused: %s.", tame(s.Name, 80), in.ID, tame(capErr.err.Error(), 300))
		m.logger.Warn("chick skill refused", "chick", in.ID, "skill", s.Name, "err", capErr.err)
		_ = m.postLogged(a, in.ChannelID, "📚 "+msg, "")
		return false, msg, nil
	}
	if err != nil {
		m.logger.Error("cannot store a chick's skill", "chick", in.ID, "skill", s.Name, "err", err)
		msg := fmt.Sprintf("Skill %s from chick %s could not be stored; the operator's log says why.", s.Name, in.ID)
		if m.paceNotice(in, noticeSkillRefused, s.Name) {
			_ = m.postLogged(a, in.ChannelID, "📚 "+msg, "")
		}
		return false, msg, nil
	}
	if change == skills.Unchanged {
		return true, fmt.Sprintf("skill %s is unchanged in %s", s.Name, where), nil
	}
	m.logger.Info("chick skill stored", "chick", in.ID, "skill", s.Name, "change", change, "dir", dir)
	msg := fmt.Sprintf("Chick %s %s skill `%s` in %s: %s", in.ID, change, s.Name, where, tame(s.Description, 200))
	if m.paceNotice(in, noticeSkill, s.Name) {
		_ = m.postLogged(a, in.ChannelID, "📚 "+msg, "")
	}
	return true, msg, nil
}

// UpdateChickMemory appends to or replaces the chick's channel memory
// (MEMORY.md) within its budget, as update_memory does for Mother; an
// update is posted and logged in the channel, a refusal is returned with
// the reason.
func (m *Mother) UpdateChickMemory(_ context.Context, in hatchery.Info, mode, content string) (bool, string, error) {
	if in.ChannelDir == "" {
		return false, "refused: this chick has no channel directory", nil
	}
	msg, err := updateMemoryFile(filepath.Join(in.ChannelDir, "MEMORY.md"), "channel", prompt.BudgetChannelMemory, mode, content)
	switch {
	case errors.Is(err, errMemoryRefused):
		m.logger.Info("chick memory update refused", "chick", in.ID, "err", err)
		return false, err.Error(), nil
	case err != nil:
		return false, "", err
	}
	m.logger.Info("chick updated channel memory", "chick", in.ID, "mode", mode)
	if a, ok := m.Adapter(in.Adapter); ok && m.paceNotice(in, noticeMemory, "") {
		_ = m.postLogged(a, in.ChannelID, fmt.Sprintf("🧠 Chick %s updated this channel's memory (%s).", in.ID, mode), "")
	}
	return true, msg, nil
}

// capError is a skill refused for its directory's caps (chicks.skills).
type capError struct{ err error }

func (e *capError) Error() string { return e.err.Error() }

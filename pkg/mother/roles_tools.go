package mother

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/prompt"
)

// The roles are enforced at the tool call: whatever the model was told or
// tries, a tool whose permission the person asking lacks does not run.
// Who asks is the run's RunInfo (the user id the adapter delivered, or the
// id a chick was started for), which nothing the model writes can change.

// toolPerms returns the permissions a call of Mother's tool name with
// args needs (nil: none). cfg gives the default tier.
func toolPerms(cfg *config.Config, name string, args json.RawMessage) []string {
	switch name {
	case "spawn_chick":
		var in struct {
			Tier string `json:"tier"`
		}
		_ = json.Unmarshal(args, &in)
		tier := strings.TrimSpace(in.Tier)
		if tier == "" {
			tier = cfg.Chicks.DefaultTier
		}
		return []string{config.PermChicks + ":" + tier}
	case "schedule_event":
		var in struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(args, &in)
		if in.Type == "periodic" {
			return []string{config.PermEvents, config.PermEventsPeriod}
		}
		return []string{config.PermEvents}
	case "cancel_event", "resume_event":
		return []string{config.PermEvents}
	case "invoke_tool":
		var in struct {
			Tool string `json:"tool"`
		}
		_ = json.Unmarshal(args, &in)
		return []string{config.PermToolPrefix + strings.TrimSpace(in.Tool)}
	case "write", "edit":
		return []string{config.PermFilesWrite}
	}
	return nil
}

// gateTools wraps each of Mother's tools that needs a permission.
func (m *Mother) gateTools(tools []agent.Tool) []agent.Tool {
	out := make([]agent.Tool, len(tools))
	for i, t := range tools {
		if toolPerms(m.cfg, t.Spec().Name, json.RawMessage(`{}`)) == nil {
			out[i] = t
			continue
		}
		out[i] = gatedTool{Tool: t, m: m}
	}
	return out
}

// gatedTool checks the person's permission before the tool runs.
type gatedTool struct {
	agent.Tool
	m *Mother
}

func (g gatedTool) Run(ctx context.Context, args json.RawMessage) (agent.Result, error) {
	ri, ok := chat.RunInfoFrom(ctx)
	if !ok || ri.Adapter == "" {
		// Not a channel's run: the tool refuses by itself.
		return g.Tool.Run(ctx, args)
	}
	for _, perm := range toolPerms(g.m.cfg, g.Spec().Name, args) {
		if sentence, ok := g.m.permit(ctx, ri.Adapter, ri.ChannelID, ri.ActingFor, perm); !ok {
			g.m.tellRefusal(ctx, ri, sentence)
			return agent.Result{Text: "Refused: " + sentence + " Tell the person exactly that, in one sentence; do not try again, nor another way around it.", IsError: true}, nil
		}
	}
	return g.Tool.Run(ctx, args)
}

// refusalsKey carries the sentences already posted in a run.
type refusalsKey struct{}

type postedRefusals struct {
	mu   sync.Mutex
	seen map[string]bool
}

func withRefusals(ctx context.Context) context.Context {
	return context.WithValue(ctx, refusalsKey{}, &postedRefusals{seen: map[string]bool{}})
}

// tellRefusal posts a refusal to the run's channel, once per run, so the
// person sees it whatever the model then says.
func (m *Mother) tellRefusal(ctx context.Context, ri chat.RunInfo, sentence string) {
	if p, ok := ctx.Value(refusalsKey{}).(*postedRefusals); ok {
		p.mu.Lock()
		seen := p.seen[sentence]
		p.seen[sentence] = true
		p.mu.Unlock()
		if seen {
			return
		}
	}
	a, ok := m.Adapter(ri.Adapter)
	if !ok {
		return
	}
	m.post(ctx, a, ri.ChannelID, sentence)
}

// actingFor is the user id a job's run acts for: the sender of a message,
// the person a chick was started for, the person who scheduled an event
// (empty for an event file written by hand: the channel's default role).
func (j *Job) actingFor() string {
	switch j.kind() {
	case KindMessage:
		return j.Trigger.Sender.ID
	case KindChick:
		if j.Chick != nil {
			return j.Chick.StartedBy
		}
	case KindEvent:
		return j.EventBy
	}
	return ""
}

// permissionsSection tells Mother's model what the person the run acts
// for may do, so she does not offer what would be refused.
func (m *Mother) permissionsSection(ri chat.RunInfo, roles []string) prompt.Section {
	var may, mayNot []string
	tiers := sortedKeys(m.cfg.Chicks.Tiers)
	check := func(perm string) {
		if m.grants(roles, perm) {
			may = append(may, permAction(perm))
		} else {
			mayNot = append(mayNot, permAction(perm))
		}
	}
	var tierOK, tierNo []string
	for _, t := range tiers {
		if m.grants(roles, config.PermChicks+":"+t) {
			tierOK = append(tierOK, t)
		} else {
			tierNo = append(tierNo, t)
		}
	}
	switch {
	case len(tierOK) > 0 && len(tierNo) == 0:
		may = append(may, "start chicks")
	case len(tierOK) > 0:
		may = append(may, "start chicks on the "+orList(tierOK)+" tier only")
	default:
		mayNot = append(mayNot, "start chicks")
	}
	for _, p := range []string{config.PermEvents, config.PermEventsPeriod, config.PermFilesWrite, config.PermAccessApprove} {
		check(p)
	}
	for _, ht := range m.promptHostTools() {
		check(config.PermToolPrefix + ht.Name)
	}
	who := "the person asking"
	if ri.Kind == string(KindEvent) {
		who = "the person who scheduled this event"
		if ri.ActingFor == "" {
			who = "this scheduled run"
		}
	}
	body := "Roles of " + who + ": " + strings.Join(roles, ", ") + ".\n"
	if len(may) > 0 {
		body += "They may: " + strings.Join(may, "; ") + ".\n"
	}
	if len(mayNot) > 0 {
		body += "They may not: " + strings.Join(mayNot, "; ") + ". Do not offer these; a tool call for them is refused and they are told so.\n"
	}
	return prompt.Section{Title: "What the person asking may do", Body: strings.TrimSpace(body)}
}

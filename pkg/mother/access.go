package mother

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/egress"
	"github.com/mother-chat/mother/pkg/hatchery"
)

// accessRequest is one chick's pending request_access: one per chick and
// destination; a chick that asks again (its call was cut) joins the wait.
type accessRequest struct {
	key    string
	chick  hatchery.Info
	dest   string
	adapt  chat.Adapter
	done   chan struct{}
	grant  egress.Grant
	timer  clock.Timer
	posted chan struct{} // closed once the request is in the channel
	// Set before posted is closed, when the request went out with
	// buttons: the adapter that takes them away, the message holding them
	// and the request's first line (what the message keeps once answered).
	chooser chat.Chooser
	msgID   string
	header  string
}

// Answers to access requests (ParseAccessAnswer).
const (
	AnswerAllow  = "allow"
	AnswerAlways = "always"
	AnswerDeny   = "deny"
)

// ParseAccessAnswer recognises an admin's answer to a chick's access
// request: "allow <chick id>", "always <chick id>" or "deny <chick id>",
// optionally followed by the destination (needed when more than one
// request is pending for the id), in any case, after leading mentions,
// with the id in backticks or not.
func ParseAccessAnswer(text string) (verb, chickID, destination string, ok bool) {
	fields := strings.Fields(text)
	for len(fields) > 0 && (strings.HasPrefix(fields[0], "@") || strings.HasPrefix(fields[0], "<@")) {
		fields = fields[1:]
	}
	if len(fields) < 2 || len(fields) > 3 {
		return "", "", "", false
	}
	verb = strings.ToLower(strings.Trim(fields[0], ".,!:;"))
	if verb != AnswerAllow && verb != AnswerAlways && verb != AnswerDeny {
		return "", "", "", false
	}
	chickID = strings.ToLower(strings.Trim(fields[1], "`.,!:;"))
	if !strings.HasPrefix(chickID, "c-") || len(chickID) < 4 {
		return "", "", "", false
	}
	if len(fields) == 3 {
		destination = strings.ToLower(strings.TrimRight(strings.Trim(fields[2], "`"), ".,!;"))
		if d, err := egress.ParseRequest(destination); err == nil {
			destination = d // as requests are kept ("PyPI.org.:443" is "pypi.org:443")
		}
	}
	return verb, chickID, destination, true
}

// RequestAccess implements nest.AccessDesk: a chick asks for a
// destination its allowlist does not hold. Already allowed: granted at
// once. Otherwise Mother posts the request in the chick's channel and the
// call waits for an admin's answer (allow, always, deny), the request
// timeout (chicks.egress.requestTimeout), the chick's end or Mother's
// shutdown (egress.ErrUnavailable: the chick asks the next Mother).
func (m *Mother) RequestAccess(ctx context.Context, in hatchery.Info, destination, reason string) (egress.Grant, error) {
	if m.egress == nil {
		return egress.Grant{Message: "this Mother takes no access requests; ask the operator to add the destination to chicks.egress.allow"}, nil
	}
	// One host and one port, never a pattern, whatever the chick checked:
	// only the operator writes wildcards (chicks.egress.allow).
	dest, err := egress.ParseRequest(destination)
	if err != nil {
		m.logger.Info("access request refused: not requestable", "chick", in.ID, "destination", oneLine(destination, 100), "err", err)
		return egress.Grant{Message: "refused: " + err.Error()}, nil
	}
	if g, refused := m.accessRefused(in, dest); refused {
		return g, nil
	}
	ci := egress.ChickInfo{ID: in.ID, Channel: in.Channel, Tier: in.Tier}
	covered, err := m.egress.Covered(ci, dest)
	if err != nil {
		return egress.Grant{}, err
	}
	if covered {
		return egress.Grant{Granted: true, Message: dest + " is already allowed for this chick"}, nil
	}
	a, ok := m.Adapter(in.Adapter)
	if !ok {
		return egress.Grant{Message: "nobody can be asked: this chick's chat adapter is not configured"}, nil
	}
	key := in.ID + "\x00" + strings.ToLower(dest)
	m.accessMu.Lock()
	if m.ctx.Err() != nil {
		m.accessMu.Unlock()
		return egress.Grant{}, egress.ErrUnavailable
	}
	r, waiting := m.access[key]
	if !waiting {
		if why := m.accessCapLocked(in); why != "" {
			m.accessMu.Unlock()
			m.logger.Debug("access request refused: too many pending", "chick", in.ID, "destination", dest)
			return egress.Grant{Message: why}, nil
		}
		r = &accessRequest{key: key, chick: in, dest: dest, adapt: a, done: make(chan struct{}), posted: make(chan struct{})}
		m.access[key] = r
		wait := m.egress.RequestTimeout()
		r.timer = m.clock.AfterFunc(wait, func() { m.accessTimedOut(r, wait) })
	}
	others := 0
	for _, o := range m.access {
		if o.chick.ID == in.ID && o != r {
			others++
		}
	}
	m.accessMu.Unlock()
	if !waiting {
		m.postAccessRequest(r, reason, others > 0)
	} else {
		m.logger.Info("chick asks again for access it is waiting for", "chick", in.ID, "destination", dest)
	}
	select {
	case <-r.done:
		return r.grant, nil
	case <-ctx.Done():
		return egress.Grant{}, ctx.Err()
	case <-m.ctx.Done():
		return egress.Grant{}, egress.ErrUnavailable
	}
}

// postAccessRequest posts (and logs) the request in the chick's channel.
// If it cannot be posted, the request is refused at once: nobody would
// see it.
func (m *Mother) postAccessRequest(r *accessRequest, reason string, several bool) {
	defer close(r.posted)
	answer := r.chick.ID
	if several {
		answer += " " + r.dest
	}
	var b strings.Builder
	fmt.Fprintf(&b, "🔐 chick `%s` asks to reach `%s`", r.chick.ID, r.dest)
	if reason = tame(reason, 300); reason != "" {
		b.WriteString(": " + reason)
		if !strings.ContainsAny(reason[len(reason)-1:], ".!?") {
			b.WriteString(".")
		}
	} else {
		b.WriteString(".")
	}
	header := b.String()
	fmt.Fprintf(&b, "\nAn admin answers `allow %s` (this chick), `always %s` (this channel, kept) or `deny %s`.", answer, answer, answer)
	text := b.String()
	m.logger.Info("chick asks for network access", "chick", r.chick.ID, "channel", r.chick.Channel, "destination", r.dest)
	// With buttons where the adapter has them; the text keeps the typed
	// answers for admins on clients that show no buttons.
	post := func(ctx context.Context) (string, error) { return r.adapt.Post(ctx, r.chick.ChannelID, text) }
	ch, buttons := r.adapt.(chat.Chooser)
	choices := accessChoices(r.chick.ID, r.dest)
	if buttons && choices != nil {
		post = func(ctx context.Context) (string, error) {
			id, err := ch.PostChoices(ctx, r.chick.ChannelID, text, choices)
			if err == nil {
				r.chooser, r.msgID, r.header = ch, id, header
				return id, nil
			}
			m.logger.Warn("cannot post an access request with buttons; posting it without", "chick", r.chick.ID, "err", err)
			return r.adapt.Post(ctx, r.chick.ChannelID, text)
		}
	}
	if _, err := m.postLoggedWith(r.adapt, r.chick.ChannelID, text, "", post); err != nil {
		m.resolveAccess(r, egress.Grant{Message: "the request could not be posted in the channel: " + firstLine(err.Error())})
	}
}

// accessChoices are the buttons of a request: each answers exactly this
// chick and destination (a stale button cannot approve something else).
// None when the answer does not fit a button's id; admins then type it.
func accessChoices(chickID, dest string) []chat.Choice {
	answer := chickID + " " + dest
	if len(AnswerAlways+" "+answer) > chat.MaxChoiceID || strings.ContainsAny(dest, " \t\n") {
		return nil
	}
	return []chat.Choice{
		{ID: AnswerAllow + " " + answer, Label: "Allow this chick", Style: chat.ChoicePrimary},
		{ID: AnswerAlways + " " + answer, Label: "Always (this channel)"},
		{ID: AnswerDeny + " " + answer, Label: "Deny", Style: chat.ChoiceDanger},
	}
}

// endChoices takes the buttons off an answered or lapsed request, whose
// message then reads its first line and outcome. Call it once r.posted is
// closed.
func (m *Mother) endChoices(r *accessRequest, outcome string) {
	if r.chooser == nil || r.msgID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(m.ctx), time.Minute)
	defer cancel()
	if err := r.chooser.EndChoices(ctx, r.chick.ChannelID, r.msgID, r.header+"\n"+outcome); err != nil {
		m.logger.Warn("cannot take the buttons off an access request", "chick", r.chick.ID, "destination", r.dest, "err", err)
	}
}

// tame makes a chick's words safe to show: one line, at most n runes, no
// code spans to break out of, and no mentions that would notify people.
func tame(s string, n int) string {
	s = oneLine(s, n)
	s = strings.ReplaceAll(s, "`", "'")
	return strings.ReplaceAll(s, "@", "@\u200b")
}

// resolveAccess ends a pending request with g, unless it has ended
// already; it reports whether it did.
func (m *Mother) resolveAccess(r *accessRequest, g egress.Grant) bool {
	m.accessMu.Lock()
	defer m.accessMu.Unlock()
	if m.access[r.key] != r {
		return false
	}
	delete(m.access, r.key)
	r.timer.Stop()
	r.grant = g
	close(r.done)
	return true
}

func (m *Mother) accessTimedOut(r *accessRequest, wait time.Duration) {
	msg := "no admin answered within " + shortDuration(wait)
	if !m.resolveAccess(r, egress.Grant{Message: msg}) {
		return
	}
	m.logger.Info("access request timed out", "chick", r.chick.ID, "destination", r.dest)
	<-r.posted
	_ = m.postLogged(r.adapt, r.chick.ChannelID, fmt.Sprintf("⌛ chick `%s` asked to reach `%s`: %s; it was told so.", r.chick.ID, r.dest, msg), "")
	m.endChoices(r, "⌛ "+msg+"; the chick was told so.")
}

// accessChickEnded ends the requests of a chick that ended (nobody waits
// for the answer any more).
func (m *Mother) accessChickEnded(id string) {
	m.accessMu.Lock()
	var rs []*accessRequest
	for _, r := range m.access {
		if r.chick.ID == id {
			rs = append(rs, r)
		}
	}
	m.accessMu.Unlock()
	for _, r := range rs {
		if m.resolveAccess(r, egress.Grant{Message: "the chick has ended"}) {
			m.logger.Info("access request dropped: the chick ended", "chick", id, "destination", r.dest)
			go func() {
				<-r.posted
				m.endChoices(r, "The chick ended before an admin answered.")
			}()
		}
	}
}

// stopAccess stops the requests' timers at shutdown: their callers
// return egress.ErrUnavailable and ask the next Mother.
func (m *Mother) stopAccess() {
	m.accessMu.Lock()
	defer m.accessMu.Unlock()
	for k, r := range m.access {
		r.timer.Stop()
		delete(m.access, k)
	}
}

// shortDuration writes d as "10m", "1h30m" or "45s".
func shortDuration(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// mayApprove: a person whose roles grant access.approve in the channel
// (by default the adapter's admins), or the operator at the terminal (a
// "cli" adapter or one without configuration, as mayDM has it). A refusal
// returns its sentence.
func (m *Mother) mayApprove(ctx context.Context, adapterName, channelID, userID string) (string, bool) {
	return m.permit(ctx, adapterName, channelID, userID, config.PermAccessApprove)
}

// pendingIn returns the requests pending in channel qid whose chick id
// starts with idPrefix (and whose destination is dest, if set), and
// whether any request is pending there at all.
func (m *Mother) pendingIn(qid, idPrefix, dest string) (match []*accessRequest, any bool) {
	m.accessMu.Lock()
	defer m.accessMu.Unlock()
	for _, r := range m.access {
		if r.chick.Channel != qid {
			continue
		}
		any = true
		if strings.HasPrefix(r.chick.ID, idPrefix) && (dest == "" || strings.EqualFold(r.dest, dest)) {
			match = append(match, r)
		}
	}
	slices.SortFunc(match, func(a, b *accessRequest) int { return strings.Compare(a.key, b.key) })
	return match, any
}

// isAccessAnswer reports whether msg is an answer to an access request
// (handleAccessAnswer's business, not the model's): "allow|always|deny
// <id>" naming a pending request, or while requests are pending in the
// channel, or addressed to Mother, or sent while she was down (then only
// logged: nobody waits for it any more). Deliver asks before the message
// is logged, so no job is reserved for it.
func (m *Mother) isAccessAnswer(a chat.Adapter, msg chat.ChannelMessage, late, addressed bool) bool {
	_, idPrefix, dest, ok := ParseAccessAnswer(msg.Text)
	if !ok || m.egress == nil {
		return false
	}
	match, anyPending := m.pendingIn(chat.QualifiedID(a.Name(), msg.ChannelID), idPrefix, dest)
	return late || len(match) > 0 || addressed || anyPending
}

// handleAccessAnswer deals with a message that reads as an answer to an
// access request, typed or clicked (msg.Choice: a button of the request).
// It reports whether the message was one (handled here, not by the
// model). Called with the channel's order lock held; it calls unlock
// before posting. A click is answered like a typed answer; what concerns
// only the clicker (not an admin, nothing pending) is shown to them alone
// where the adapter can (chat.ClickReplier).
func (m *Mother) handleAccessAnswer(ctx context.Context, a chat.Adapter, msg chat.ChannelMessage, late, addressed bool, unlock func()) bool {
	if !m.isAccessAnswer(a, msg, late, addressed) {
		return false
	}
	verb, idPrefix, dest, _ := ParseAccessAnswer(msg.Text)
	qid := chat.QualifiedID(a.Name(), msg.ChannelID)
	match, _ := m.pendingIn(qid, idPrefix, dest)
	if late && len(match) == 0 {
		// An answer sent while Mother was down, to a request nobody waits
		// for any more: logged, nothing else.
		return true
	}
	unlock()
	lg := m.logger.With("channel", qid, "user", msg.Sender.ID)
	replyTo := msg.ID
	if msg.Choice {
		replyTo = msg.ReplyTo // a click is no message: answer the request
	}
	reply := func(text string) { _ = m.postLogged(a, msg.ChannelID, text, replyTo) }
	tell := reply
	if msg.Choice {
		tell = func(text string) { m.replyToClick(a, msg, text) }
	}
	if len(match) == 0 {
		what := "`" + idPrefix + "`"
		if dest != "" {
			what += " for `" + dest + "`"
		}
		text := "There is no pending access request of chick " + what + " here."
		if dest != "" {
			// The admin named a destination the chick did not ask for (or
			// not in that form): show what it did ask for.
			if others, _ := m.pendingIn(qid, idPrefix, ""); len(others) > 0 && m.isApprover(ctx, a.Name(), msg.ChannelID, msg.Sender.ID) {
				text += " Pending:" + accessCommands(verb, others)
			}
		}
		tell(text)
		return true
	}
	if sentence, ok := m.mayApprove(ctx, a.Name(), msg.ChannelID, msg.Sender.ID); !ok {
		lg.Info("access answer from a non-admin ignored", "chick", idPrefix, "answer", verb, "click", msg.Choice)
		if !late {
			tell(strings.TrimSuffix(sentence, ".") + "; yours was ignored.")
		}
		return true
	}
	if len(match) > 1 {
		// An answer answers exactly the request it names. With more than
		// one pending for the id (the chick asked twice, or the prefix
		// names two chicks), a bare "allow <id>" may have been typed for
		// the request the admin read while another arrived: it answers
		// none, allow and always as well as deny (a refusal the admin did
		// not give would be logged as theirs), and lists the commands
		// that name each.
		said := verb + " " + idPrefix
		if dest != "" {
			said += " " + dest
		}
		lg.Info("access answer names more than one request; none answered", "chick", idPrefix, "answer", verb, "pending", len(match))
		tell(fmt.Sprintf("`%s` names %d pending access requests, so it answered none of them. Name the one you mean:%s", said, len(match), accessCommands(verb, match)))
		return true
	}
	r := match[0]
	// The admin who answered is named in the notice as Mother's own
	// mention: the one live mention in it (the destination and the
	// chick's id are a chick's words, inert).
	admin := chat.MentionOf(msg.Sender)
	who := admin.Text()
	<-r.posted
	ci := egress.ChickInfo{ID: r.chick.ID, Channel: r.chick.Channel, Tier: r.chick.Tier}
	var g egress.Grant
	var notice string
	switch verb {
	case AnswerAllow, AnswerAlways:
		if why := m.egress.Refused(ci, r.dest); why != "" {
			// The gate would refuse it whatever the admin says (the
			// operator's hosts changed since it was asked): say so.
			g = egress.Grant{Message: "refused: " + why + ", though " + who + " allowed it"}
			notice = fmt.Sprintf("⛔ %s allowed chick `%s` to reach `%s`, but %s; the chick was told it is refused.", who, r.chick.ID, r.dest, why)
			break
		}
		scope, scopeText := egress.ScopeChick, "for this chick"
		notice = fmt.Sprintf("✅ %s allowed chick `%s` to reach `%s` (this chick, until it ends).", who, r.chick.ID, r.dest)
		if verb == AnswerAlways {
			scope, scopeText = egress.ScopeChannel, "for this channel"
			notice = fmt.Sprintf("✅ %s allowed chick `%s`, and every chick of this channel from now on, to reach `%s` (kept).", who, r.chick.ID, r.dest)
		}
		if err := m.egress.Approve(ci, scope, r.dest); err != nil {
			lg.Error("cannot keep an approval", "chick", r.chick.ID, "destination", r.dest, "err", err)
			reply(fmt.Sprintf("I could not save the approval of `%s` for chick `%s` (%s); the request is still open.", r.dest, r.chick.ID, firstLine(err.Error())))
			return true
		}
		g = egress.Grant{Granted: true, Scope: scope, Message: "approved by " + who + " " + scopeText + approvalRider(r.dest)}
	case AnswerDeny:
		g = egress.Grant{Message: "refused by " + who}
		notice = fmt.Sprintf("⛔ %s refused chick `%s` access to `%s`.", who, r.chick.ID, r.dest)
	}
	if !m.resolveAccess(r, g) {
		return true // answered (or timed out) meanwhile
	}
	lg.Info("access request answered", "chick", r.chick.ID, "destination", r.dest, "answer", verb, "click", msg.Choice)
	_ = m.postLoggedMentioning(a, msg.ChannelID, notice, replyTo, []chat.Mention{admin})
	m.endChoices(r, notice)
	return true
}

// maxListedRequests bounds the commands accessCommands lists.
const maxListedRequests = 10

// accessCommands lists, one a line, the exact answer (verb, full chick id
// and destination) that names each of rs.
func accessCommands(verb string, rs []*accessRequest) string {
	var b strings.Builder
	for i, r := range rs {
		if i == maxListedRequests {
			fmt.Fprintf(&b, "\n… and %d more", len(rs)-i)
			break
		}
		fmt.Fprintf(&b, "\n• `%s %s %s`", verb, r.chick.ID, r.dest)
	}
	return b.String()
}

// choose handles a click on one of Mother's buttons (msg.Choice). Clicks
// are answers, never messages: they are not logged as something said and
// never reach the model. The only buttons Mother posts answer access
// requests.
func (m *Mother) choose(ctx context.Context, a chat.Adapter, msg chat.ChannelMessage, late bool) {
	lg := m.logger.With("channel", chat.QualifiedID(a.Name(), msg.ChannelID), "user", msg.Sender.ID)
	if late || msg.Sender.ID == "" || msg.Sender.ID == a.SelfID() || msg.Sender.IsBot {
		lg.Warn("ignoring a click that is late, anonymous or a bot's")
		return
	}
	if m.handleAccessAnswer(ctx, a, msg, false, true, func() {}) {
		return
	}
	lg.Info("click on a button that is no longer in use", "choice", oneLine(msg.Text, 100))
	m.replyToClick(a, msg, "This button no longer does anything.")
}

// replyToClick answers a click so that only the clicker sees it, where
// the adapter can; otherwise in the channel, as a reply to the message
// with the buttons.
func (m *Mother) replyToClick(a chat.Adapter, msg chat.ChannelMessage, text string) {
	if cr, ok := a.(chat.ClickReplier); ok {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(m.ctx), time.Minute)
		defer cancel()
		err := cr.ReplyToClick(ctx, msg, text)
		if err == nil {
			return
		}
		m.logger.Warn("cannot answer a click privately; answering in the channel", "channel", chat.QualifiedID(a.Name(), msg.ChannelID), "err", err)
	}
	_ = m.postLogged(a, msg.ChannelID, text, msg.ReplyTo)
}

// postLogged posts a notice and writes it to the channel's log as
// Mother's message (replyTo: the message it answers, if any).
func (m *Mother) postLogged(a chat.Adapter, channelID, text, replyTo string) error {
	_, err := m.postLoggedWith(a, channelID, text, replyTo, func(ctx context.Context) (string, error) { return a.Post(ctx, channelID, text) })
	return err
}

// postLoggedWith is postLogged posting with post; it returns the
// platform id of the message.
func (m *Mother) postLoggedWith(a chat.Adapter, channelID, text, replyTo string, post func(context.Context) (string, error)) (string, error) {
	ctx := context.WithoutCancel(m.ctx)
	id, err := post(ctx)
	if err != nil {
		m.logger.Error("cannot post notice", "channel", chat.QualifiedID(a.Name(), channelID), "err", err)
		return "", err
	}
	m.metrics.MessageOut(a.Name())
	if id == "" {
		id = m.newID()
	}
	ch, err := m.store.Channel(a.Name(), channelID)
	if err == nil {
		_, err = ch.AppendMessage(chat.ChannelMessage{ID: id, ChannelID: channelID, Timestamp: m.now(),
			Sender: ownSender(a), Text: text, ReplyTo: replyTo})
	}
	if err != nil {
		m.logger.Error("cannot log notice", "channel", chat.QualifiedID(a.Name(), channelID), "err", err)
	}
	return id, nil
}

// egressLine is how one gate connection reads in the chick's progress.
func egressLine(e hatchery.Egress) string {
	dest := egress.Destination(e.Host, e.Port)
	why := strings.TrimSpace(e.Reason)
	switch e.Outcome {
	case hatchery.EgressAllowed:
		return "reached: " + dest
	case hatchery.EgressRefused:
		if why == "" {
			why = egress.ReasonNotAllowed
		}
	case hatchery.EgressCapped:
		if why == "" {
			why = egress.ReasonCapped
		}
	case hatchery.EgressFailed:
		if why == "" {
			why = "unreachable"
		}
		return "failed: " + dest + " (" + oneLine(why, 200) + ")"
	}
	if why == "" {
		why = "blocked address"
	}
	return "blocked: " + dest + " (" + oneLine(why, 200) + ")"
}

// maxEgressLines bounds the distinct connection lines shown per chick.
const maxEgressLines = 50

// ChickEgress implements hatchery.EgressObserver: each distinct
// connection line once in the chick's progress, as a tool detail (so the
// adapter's quiet settings apply).
func (o chickObserver) ChickEgress(in hatchery.Info, e hatchery.Egress) {
	m := o.m
	v := m.view(in)
	if v == nil {
		return
	}
	line := egressLine(e)
	v.do(func() {
		if v.egressSeen == nil {
			v.egressSeen = map[string]bool{}
		}
		if v.egressSeen[line] || len(v.egressSeen) > maxEgressLines {
			return
		}
		v.egressSeen[line] = true
		if len(v.egressSeen) > maxEgressLines {
			line = "more connections not shown"
		}
		ev := agent.Event{Type: agent.EventToolEnd, Time: e.Time, ToolCallID: fmt.Sprintf("egress-%d", len(v.egressSeen)),
			ToolName: "egress", Label: "egress", Result: line, IsError: e.Outcome != hatchery.EgressAllowed, Duration: e.Duration}
		v.replyFor(m, m.ctx).Event(context.WithoutCancel(m.ctx), ev)
	})
}

var _ hatchery.EgressObserver = chickObserver{}

package broker

import (
	"hash/maphash"
	"strconv"
	"sync"

	"github.com/mother-chat/mother/pkg/model"
)

// A call's prompt is mostly the previous call's prompt and answer, with a
// few messages added. The provider reported what the previous prompt and
// answer cost in tokens, and that count is a true bound on the unchanged
// part: only the messages added since need the byte bound of
// EstimateInput. prefixes keeps, per model, the last calls' prompts as
// hashes of their prefixes, and what each was charged.

// prefixKeep is how many recent calls a model's record keeps (the last
// call of each caller is what matters; a few callers share a model).
const prefixKeep = 32

// seen is one settled call: h[k] is the hash of its system text, tools
// and first k messages; in and out what the provider reported.
type seen struct {
	who     string
	h       []uint64
	in, out int64
}

// prefixes is the recent calls of each model ("provider/model").
type prefixes struct {
	seed maphash.Seed
	mu   sync.Mutex
	by   map[string][]seen
}

func newPrefixes() *prefixes {
	return &prefixes{seed: maphash.MakeSeed(), by: map[string][]seen{}}
}

// hashes are the prefix hashes of req: h[k] covers the model, system
// text, tools and the first k messages. The seed is random per Mother, so
// a chick cannot make two different prompts hash alike.
func (p *prefixes) hashes(req model.Request) []uint64 {
	var h maphash.Hash
	h.SetSeed(p.seed)
	str := func(s string) {
		h.WriteString(strconv.Itoa(len(s)))
		h.WriteByte(':')
		h.WriteString(s)
	}
	str(req.Model)
	str(req.System)
	for _, t := range req.Tools {
		str(t.Name)
		str(t.Description)
		str(string(t.Parameters))
	}
	out := make([]uint64, 0, len(req.Messages)+1)
	out = append(out, h.Sum64())
	for _, m := range req.Messages {
		str(string(m.Role))
		str(m.Content)
		str(m.ToolCallID)
		str(m.ToolName)
		for _, tc := range m.ToolCalls {
			str(tc.ID)
			str(tc.Name)
			str(string(tc.Args))
		}
		for _, img := range m.Images {
			str(string(img.Data))
		}
		out = append(out, h.Sum64())
	}
	return out
}

// bound is the least true bound of req's prompt tokens: EstimateInput,
// or a recent call of the same model whose prompt shares a prefix with
// req's, counted at what the provider reported for it plus the byte
// bound of the messages after the shared prefix.
func (p *prefixes) bound(key string, req model.Request, h []uint64) int64 {
	best := EstimateInput(req)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.by[key] {
		k := 0 // messages shared
		for k+1 < len(s.h) && k+1 < len(h) && s.h[k+1] == h[k+1] {
			k++
		}
		if s.h[0] != h[0] {
			continue // another system text or tools
		}
		n := s.in
		rest := req.Messages[k:]
		if k == len(s.h)-1 && len(rest) > 0 && rest[0].Role == model.RoleAssistant {
			// The whole previous prompt is shared and the next message is
			// its answer: the reported output counts it, with the
			// template's markup around the message and its calls.
			n += min(messageBytes(rest[0]), s.out+estMessage+int64(estToolCall*len(rest[0].ToolCalls)))
			rest = rest[1:]
		}
		for _, m := range rest {
			n += messageBytes(m)
		}
		best = min(best, n)
	}
	return best
}

// note records a settled call of who whose provider reported u.
func (p *prefixes) note(key, who string, h []uint64, u model.Usage) {
	if u.InputTokens <= 0 {
		return // no report to count on
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.by[key]
	for i, s := range list {
		if s.who == who {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) >= prefixKeep {
		list = list[1:]
	}
	p.by[key] = append(list, seen{who: who, h: h, in: u.InputTokens, out: u.OutputTokens})
}

// forget drops who's calls (an ended chick).
func (p *prefixes) forget(who string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, list := range p.by {
		out := list[:0]
		for _, s := range list {
			if s.who != who {
				out = append(out, s)
			}
		}
		if len(out) == 0 {
			delete(p.by, key)
		} else {
			p.by[key] = out
		}
	}
}

package broker

import (
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model"
)

// Prompt estimate allowances (EstimateInput), in tokens.
const (
	// estRequest: a request's fixed part (begin/end markers, a model's
	// short default system text).
	estRequest = 64
	// estMessage: a chat template's markers around one message (role
	// headers, end of turn).
	estMessage = 8
	// estToolCall: the markup around one tool call in the context.
	estToolCall = 16
	// estTools: a provider's own tool-use instructions when tools are
	// offered (Anthropic's is 346 tokens on its current models).
	estTools = 512
	// estTool: the JSON wrapping of one tool's description.
	estTool = 32
	// estImage: one image. Not a bound: Anthropic charges at most about
	// 1,600 tokens an image, most local vision models a fixed 256 to
	// 1,600; a model that tiles large images can charge more.
	estImage = 2048
)

// EstimateInput is the broker's upper estimate of req's prompt tokens:
// one token per UTF-8 byte of every text the prompt holds (system text,
// messages, tool calls and their arguments, tool descriptions and
// schemas; no byte-level tokenizer makes more tokens than bytes), plus
// allowances for what the provider adds around them and a fixed allowance
// per image.
func EstimateInput(req model.Request) int64 {
	n := int64(estRequest + len(req.System))
	for _, m := range req.Messages {
		n += int64(estMessage + len(m.Role) + len(m.Content) + len(m.ToolCallID) + len(m.ToolName))
		for _, tc := range m.ToolCalls {
			n += int64(estToolCall + len(tc.ID) + len(tc.Name) + len(tc.Args))
		}
		n += int64(estImage * len(m.Images))
	}
	if len(req.Tools) > 0 {
		n += estTools
	}
	for _, t := range req.Tools {
		n += int64(estTool + len(t.Name) + len(t.Description) + len(t.Parameters))
	}
	return n
}

// OutputLimit is the output limit a call of tier t is sent with: the
// tier's maxOutputTokens (default 8192), lowered by the caller's own
// limit when that is positive and smaller.
func OutputLimit(t config.Tier, requested int) int {
	limit := t.MaxOutputTokens
	if limit <= 0 {
		limit = config.DefaultTierMaxOutputTokens
	}
	if requested > 0 && requested < limit {
		limit = requested
	}
	return limit
}

package broker

import (
	"bytes"
	"image"
	// The formats whose headers ImageTokens reads.
	_ "image/gif"
	_ "image/jpeg"
	_ "image/png"

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
	// estImageMin: the least an image is counted, however small.
	estImageMin = 85
	// estImagePixels: pixels per token of an image whose size its header
	// tells (Anthropic's own estimate, width*height/750; Qwen-VL's is
	// one token per 28x28 pixels, much the same).
	estImagePixels = 750
	// ImageBytesPerToken: an image is counted at least one token per
	// this many of its bytes, whatever its header says (a stream of
	// bytes no decoder reads is counted by its size).
	ImageBytesPerToken = 1024
)

// EstimateInput is the broker's upper estimate of req's prompt tokens:
// one token per UTF-8 byte of every text the prompt holds (system text,
// messages, tool calls and their arguments, tool descriptions and
// schemas; no byte-level tokenizer makes more tokens than bytes), plus
// allowances for what the provider adds around them and each image by its
// real size (ImageTokens).
func EstimateInput(req model.Request) int64 {
	n := int64(estRequest + len(req.System))
	for _, m := range req.Messages {
		n += messageBytes(m)
	}
	if len(req.Tools) > 0 {
		n += estTools
	}
	for _, t := range req.Tools {
		n += int64(estTool + len(t.Name) + len(t.Description) + len(t.Parameters))
	}
	return n
}

// messageBytes is EstimateInput's count of one message.
func messageBytes(m model.Message) int64 {
	n := int64(estMessage + len(m.Role) + len(m.Content) + len(m.ToolCallID) + len(m.ToolName))
	for _, tc := range m.ToolCalls {
		n += int64(estToolCall + len(tc.ID) + len(tc.Name) + len(tc.Args))
	}
	for _, img := range m.Images {
		n += ImageTokens(img)
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

// ImageTokens is the broker's estimate of one image's tokens, by its real
// size: its pixels over 750 when its header tells them (PNG, JPEG, GIF),
// and at least a token per ImageBytesPerToken of its bytes (85 at the
// least). A provider that shrinks large images charges less; one that
// tiles them may charge about this.
func ImageTokens(img model.Image) int64 {
	n := max(int64(estImageMin), (int64(len(img.Data))+ImageBytesPerToken-1)/ImageBytesPerToken)
	if c, _, err := image.DecodeConfig(bytes.NewReader(img.Data)); err == nil && c.Width > 0 && c.Height > 0 {
		n = max(n, int64(c.Width)*int64(c.Height)/estImagePixels)
	}
	return n
}

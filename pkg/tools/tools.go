// Package tools holds the agent's file and shell tools: bash, read, write,
// edit and attach for a chick, and a read-only, workspace-confined read for
// Mother. Every path argument is resolved inside one workspace directory;
// `..` and symlink escapes are refused. Every tool takes a required
// `label` argument, a short description shown to users while it runs.
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/clock"
)

// AttachFunc delivers a workspace file to the channel. path is the resolved
// absolute path of a regular file inside the workspace; title may be empty.
type AttachFunc func(path, title string) error

// Options tune the chick's tool set.
type Options struct {
	// BashTimeout is the default timeout of a bash command (default 10m);
	// MaxBashTimeout caps what the model may ask for (default 1h).
	BashTimeout    time.Duration
	MaxBashTimeout time.Duration
	// OutputDir is where truncated bash output is saved, relative to the
	// workspace (default "scratch/bash-output").
	OutputDir string
	// Shell runs commands (default: bash if found on PATH, else sh).
	Shell string
	// Env is the commands' environment (default: the process's).
	Env []string
	// Clock names saved output files (default clock.Real).
	Clock clock.Clock
}

func (o *Options) defaults() {
	if o.BashTimeout <= 0 {
		o.BashTimeout = 10 * time.Minute
	}
	if o.MaxBashTimeout <= 0 {
		o.MaxBashTimeout = time.Hour
	}
	if o.MaxBashTimeout < o.BashTimeout {
		o.MaxBashTimeout = o.BashTimeout
	}
	if o.OutputDir == "" {
		o.OutputDir = "scratch/bash-output"
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
}

// Chick returns the chick's full tool set (bash, read, write, edit, attach)
// confined to the workspace at root, with default options. attach delivers
// files; nil makes the attach tool report that delivery is unavailable.
func Chick(root string, attach func(path, title string) error) ([]agent.Tool, error) {
	return ChickWith(root, attach, Options{})
}

// ChickWith is Chick with options.
func ChickWith(root string, attach AttachFunc, opts Options) ([]agent.Tool, error) {
	ws, err := NewWorkspace(root)
	if err != nil {
		return nil, fmt.Errorf("chick tools: %w", err)
	}
	opts.defaults()
	return []agent.Tool{
		&Bash{ws: ws, opts: opts},
		&Read{ws: ws},
		&Write{ws: ws},
		&Edit{ws: ws},
		&Attach{ws: ws, deliver: attach},
	}, nil
}

// ReadOnly returns Mother's safe file tool: read, confined to root. allow,
// if set, is asked about every resolved path before it is read (Mother uses
// it to keep a run out of other channels' directories).
func ReadOnly(root string, allow func(ctx context.Context, abs string) error) ([]agent.Tool, error) {
	ws, err := NewWorkspace(root)
	if err != nil {
		return nil, fmt.Errorf("read tool: %w", err)
	}
	return []agent.Tool{&Read{ws: ws, allow: allow}}, nil
}

// labelProp is the schema of the label argument every tool takes.
const labelProp = `"label":{"type":"string","description":"A few words shown to the user while this runs, e.g. \"Listing the project files\""}`

// schema builds a JSON Schema object from property snippets; label is
// always present and required.
func schema(required []string, props ...string) json.RawMessage {
	req, _ := json.Marshal(append([]string{"label"}, required...))
	return json.RawMessage(`{"type":"object","properties":{` + strings.Join(append([]string{labelProp}, props...), ",") + `},"required":` + string(req) + `}`)
}

// decode unmarshals a tool's arguments, naming the tool in errors.
func decode(tool string, raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s: invalid arguments: %v", tool, err)
	}
	return nil
}

func missing(tool, arg string) error {
	return fmt.Errorf("%s: missing required argument %q", tool, arg)
}

// flexInt accepts a JSON number or a numeric string: small models send
// either.
type flexInt struct {
	v   int64
	set bool
}

func (f *flexInt) UnmarshalJSON(b []byte) error {
	s := strings.Trim(strings.TrimSpace(string(b)), `"`)
	if s == "" || s == "null" {
		return nil
	}
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		f.v, f.set = v, true
		return nil
	}
	fv, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("%s is not a number", string(b))
	}
	if fv != float64(int64(fv)) {
		return fmt.Errorf("%s is not a whole number", string(b))
	}
	f.v, f.set = int64(fv), true
	return nil
}

var errNoAttach = errors.New("attach: file delivery is not available here")

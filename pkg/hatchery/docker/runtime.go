package docker

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
)

// Runtime runs chicks on one Docker engine.
type Runtime struct {
	api API

	mu sync.Mutex
	// hosts maps a gate volume (what an isolated chick's spec names) to
	// the engine's path of the file in its gate's hosts volume
	// (placeHosts), for the chicks to mount.
	hosts map[string]string
}

var _ hatchery.Runtime = (*Runtime)(nil)

// New drives the engine api talks to; Close closes api.
func New(api API) *Runtime { return &Runtime{api: api} }

// Open dials a configured host (see Dial; DOCKER_HOST and friends from the
// environment) and drives it: the hatchery's Options.Dial.
func Open(h config.DockerHost) (hatchery.Runtime, error) {
	c, err := Dial(h, os.Getenv)
	if err != nil {
		return nil, err
	}
	return New(c), nil
}

// marked is an engine error tagged with the hatchery's kind for it; its
// text is the engine's.
type marked struct {
	kind error
	err  error
}

func (m *marked) Error() string   { return m.err.Error() }
func (m *marked) Unwrap() []error { return []error{m.kind, m.err} }

// classify marks err with the hatchery error its kind is.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case client.IsErrConnectionFailed(err):
		return &marked{hatchery.ErrUnreachable, err}
	case cerrdefs.IsNotFound(err):
		return &marked{hatchery.ErrContainerNotFound, err}
	case cerrdefs.IsConflict(err):
		return &marked{hatchery.ErrConflict, err}
	}
	return err
}

// Create implements hatchery.Runtime.
func (r *Runtime) Create(ctx context.Context, s hatchery.ContainerSpec) (string, error) {
	hosts := r.hostsFile(s.GateVolume)
	cc, hc, err := containerConfig(s, hosts)
	if err != nil {
		return "", err
	}
	resp, err := r.api.ContainerCreate(ctx, cc, hc, nil, nil, s.Name)
	if err != nil && hosts != "" && cerrdefs.IsInvalidArgument(err) {
		// The engine refuses the hosts file's mount (someone removed the
		// gate's hosts volume since Mother ensured the gate): the
		// engine's own network mode "none".
		cc, hc, _ = containerConfig(s, "")
		resp, err = r.api.ContainerCreate(ctx, cc, hc, nil, nil, s.Name)
	}
	if err != nil {
		return "", classify(err)
	}
	return resp.ID, nil
}

var _ hatchery.ImageChecker = (*Runtime)(nil)

// HasImage implements hatchery.ImageChecker.
func (r *Runtime) HasImage(ctx context.Context, ref string) (bool, error) {
	_, err := r.api.ImageInspect(ctx, ref)
	err = classify(err)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, hatchery.ErrContainerNotFound):
		return false, nil
	}
	return false, err
}

var _ hatchery.ImageInspector = (*Runtime)(nil)

// ImageLabels implements hatchery.ImageInspector.
func (r *Runtime) ImageLabels(ctx context.Context, ref string) (map[string]string, bool, error) {
	insp, err := r.api.ImageInspect(ctx, ref)
	err = classify(err)
	switch {
	case err == nil:
		if insp.Config == nil {
			return nil, true, nil
		}
		return insp.Config.Labels, true, nil
	case errors.Is(err, hatchery.ErrContainerNotFound):
		return nil, false, nil
	}
	return nil, false, err
}

// hostsFile is the engine's path of the hosts file of the gate whose
// volume is vol, or "" when there is none.
func (r *Runtime) hostsFile(vol string) string {
	if vol == "" {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hosts[vol]
}

// Start implements hatchery.Runtime.
func (r *Runtime) Start(ctx context.Context, id string) error {
	return classify(r.api.ContainerStart(ctx, id, container.StartOptions{}))
}

// Wait implements hatchery.Runtime.
func (r *Runtime) Wait(ctx context.Context, id string, next bool) <-chan hatchery.Exit {
	cond := container.WaitConditionNotRunning
	if next {
		cond = container.WaitConditionNextExit
	}
	waitCh, errCh := r.api.ContainerWait(ctx, id, cond)
	out := make(chan hatchery.Exit, 1)
	go func() {
		// The client ends its wait with an error when ctx ends, so this
		// goroutine ends with it.
		select {
		case w := <-waitCh:
			out <- hatchery.Exit{Code: w.StatusCode}
		case err := <-errCh:
			out <- hatchery.Exit{Code: -1, Err: classify(err)}
		}
	}()
	return out
}

// Kill implements hatchery.Runtime.
func (r *Runtime) Kill(ctx context.Context, id, signal string) error {
	return classify(r.api.ContainerKill(ctx, id, signal))
}

// Remove implements hatchery.Runtime.
func (r *Runtime) Remove(ctx context.Context, id string) error {
	return classify(r.api.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true}))
}

// List implements hatchery.Runtime.
func (r *Runtime) List(ctx context.Context, key, value string) ([]hatchery.Container, error) {
	list, err := r.api.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", key+"="+value))})
	if err != nil {
		return nil, classify(err)
	}
	out := make([]hatchery.Container, 0, len(list))
	for _, c := range list {
		out = append(out, hatchery.Container{ID: c.ID, State: string(c.State), Labels: c.Labels})
	}
	return out, nil
}

// Inspect implements hatchery.Runtime.
func (r *Runtime) Inspect(ctx context.Context, id string) (hatchery.ContainerState, error) {
	insp, err := r.api.ContainerInspect(ctx, id)
	if err != nil {
		return hatchery.ContainerState{ExitCode: -1}, classify(err)
	}
	if insp.ContainerJSONBase == nil || insp.State == nil {
		return hatchery.ContainerState{ExitCode: -1}, nil
	}
	return hatchery.ContainerState{Running: insp.State.Running, ExitCode: int64(insp.State.ExitCode)}, nil
}

// Logs implements hatchery.Runtime (the engine's stream demultiplexed).
func (r *Runtime) Logs(ctx context.Context, id string, follow bool, w io.Writer) error {
	rc, err := r.api.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: follow, Timestamps: false})
	if err != nil {
		return classify(err)
	}
	defer rc.Close()
	if _, err := stdcopy.StdCopy(w, w, rc); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// Version implements hatchery.Runtime.
func (r *Runtime) Version(ctx context.Context) (string, error) {
	v, err := r.api.ServerVersion(ctx)
	if err != nil {
		return "", classify(err)
	}
	return v.Version, nil
}

// Close implements hatchery.Runtime.
func (r *Runtime) Close() error { return r.api.Close() }

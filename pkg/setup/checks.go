package setup

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/ollama/ollama/api"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery/docker"
)

// Model is a model an Ollama server has.
type Model struct {
	Name string
	// Tools is whether /api/show lists the "tools" capability; Known is
	// false when show failed (older servers list no capabilities).
	Tools, Known bool
}

// checkOllama lists the server's models and their tool support.
func checkOllama(ctx context.Context, rawURL string) (version string, models []Model, err error) {
	u, err := url.Parse(strings.TrimSuffix(strings.TrimSuffix(rawURL, "/"), "/v1"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", nil, fmt.Errorf("%q is not an http(s) URL such as http://127.0.0.1:11434", rawURL)
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	c := api.NewClient(u, &http.Client{Timeout: 20 * time.Second})
	version, err = c.Version(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("no Ollama answers at %s: %w", u, err)
	}
	list, err := c.List(ctx)
	if err != nil {
		return version, nil, fmt.Errorf("list models: %w", err)
	}
	for _, m := range list.Models {
		md := Model{Name: m.Name}
		if show, err := c.Show(ctx, &api.ShowRequest{Model: m.Name}); err == nil && len(show.Capabilities) > 0 {
			md.Known = true
			for _, cp := range show.Capabilities {
				if string(cp) == "tools" {
					md.Tools = true
				}
			}
		}
		models = append(models, md)
	}
	slices.SortFunc(models, func(a, b Model) int { return strings.Compare(a.Name, b.Name) })
	return version, models, nil
}

// HostReport is what setup learned about a Docker host.
type HostReport struct {
	Version, APIVersion, OS, Arch string
	// Image is whether the chick image is present.
	Image bool
}

// checkDocker dials a host as the daemon would and asks for its version
// and the chick image.
func checkDocker(ctx context.Context, h config.DockerHost, image string, getenv func(string) string) (HostReport, error) {
	c, err := docker.Dial(h, getenv)
	if err != nil {
		return HostReport{}, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, err := c.ServerVersion(ctx)
	if err != nil {
		return HostReport{}, fmt.Errorf("no answer: %w", err)
	}
	r := HostReport{Version: v.Version, APIVersion: v.APIVersion, OS: v.Os, Arch: v.Arch}
	if _, err := c.ImageInspect(ctx, image); err == nil {
		r.Image = true
	} else if !cerrdefs.IsNotFound(err) {
		return r, fmt.Errorf("look for image %s: %w", image, err)
	}
	return r, nil
}

// loadHint says how to get the chick image onto a host.
func loadHint(h config.DockerHost, image string) string {
	switch {
	case strings.HasPrefix(h.Address, "ssh://"):
		u, _ := url.Parse(h.Address)
		return fmt.Sprintf("docker save %s | ssh %s docker load", image, u.Host)
	case strings.HasPrefix(h.Address, "tcp://"):
		return fmt.Sprintf("docker save %s | docker -H %s --tlsverify --tlscacert %s --tlscert %s --tlskey %s load", image, h.Address, h.TLSCA, h.TLSCert, h.TLSKey)
	}
	return fmt.Sprintf("make image (in Mother's source tree), or: docker load -i mother-chick.tar (a saved %s)", image)
}

package kubernetes

import (
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
)

// TestWorkspaceSizeFromResources: a chick Pod's /workspace emptyDir is
// limited to chicks.resources.workspaceBytes (the Docker driver's tmpfs
// size), unless the host sets its own workspaceSize; a bad size is an
// error naming the field. The token stays in the Secret, read through
// secretKeyRef, never a mounted file, and the Pod shares no process
// namespace and mounts no service account token.
func TestWorkspaceSizeFromResources(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{}
	cfg.SetDefaults("")
	spec := hatchery.ContainerSpec{
		Name: "c-1", Image: "img", Network: config.NetworkIsolated, Resources: cfg.Chicks.Resources, Hardening: cfg.Chicks.Hardening,
		Env:    []string{hatchery.EnvAddr + "=10.0.0.1:7777", hatchery.EnvToken + "=sk-secret"},
		Labels: map[string]string{hatchery.LabelInstance: "i"},
	}
	size := func(h config.DockerHost) string {
		t.Helper()
		cp, err := buildPod(spec, h, "ns")
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range cp.pod.Spec.Volumes {
			if v.Name == "workspace" {
				return v.EmptyDir.SizeLimit.String()
			}
		}
		return ""
	}
	if got := size(config.DockerHost{}); got != "2Gi" {
		t.Errorf("default workspace limit %s, want 2Gi (chicks.resources.workspaceBytes)", got)
	}
	spec.Resources.WorkspaceBytes = "300m"
	if got := size(config.DockerHost{}); got != "300Mi" {
		t.Errorf("workspace limit %s, want 300Mi", got)
	}
	if got := size(config.DockerHost{WorkspaceSize: "64m"}); got != "64Mi" {
		t.Errorf("workspace limit %s, want the host's 64Mi", got)
	}
	spec.Resources.WorkspaceBytes = "lots"
	if _, err := buildPod(spec, config.DockerHost{}, "ns"); err == nil || !strings.Contains(err.Error(), "chicks.resources.workspaceBytes") {
		t.Errorf("a bad size: %v, want an error naming the field", err)
	}
	spec.Resources.WorkspaceBytes = "1g"
	cp, err := buildPod(spec, config.DockerHost{}, "ns")
	if err != nil {
		t.Fatal(err)
	}
	ps := cp.pod.Spec
	if ps.ShareProcessNamespace != nil && *ps.ShareProcessNamespace || ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken || len(ps.Containers) != 1 || len(ps.InitContainers) != 0 {
		t.Errorf("the Pod shares processes, mounts a token, or has more than the chick's container: %+v", ps)
	}
	for _, v := range ps.Volumes {
		if v.Secret != nil || v.Projected != nil {
			t.Errorf("a secret mounted as files: %+v", v)
		}
	}
	for _, e := range ps.Containers[0].Env {
		if strings.Contains(e.Value, "sk-secret") {
			t.Errorf("the token in the Pod's spec: %s", e.Name)
		}
	}
	if string(cp.secret.Data[hatchery.EnvToken]) != "sk-secret" {
		t.Errorf("the token is not in the Secret: %q", cp.secret.Data)
	}
}

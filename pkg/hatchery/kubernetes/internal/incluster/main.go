// Command incluster drives the Kubernetes runtime from inside a Pod, with
// the in-cluster configuration (no kubeconfig: the Pod's service account
// token and CA, its namespace from the service account): the driver's
// test runs it in a Pod on the test cluster (TestInClusterConfig). It runs
// one chick Pod (image $CHICK_IMAGE, echoing $CHICK_SAYS) to its end and
// prints what it saw, then "OK".
package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hatchery/kubernetes"
)

func main() {
	if err := run(); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("OK")
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rt, err := kubernetes.Open(config.DockerHost{Name: "in-cluster", Kind: config.HostKubernetes, ImagePullPolicy: "Never", WorkspaceSize: "16m"}, kubernetes.Options{})
	if err != nil {
		return err
	}
	defer rt.Close()
	fmt.Println("namespace=" + rt.Namespace())
	v, err := rt.Version(ctx)
	if err != nil {
		return err
	}
	fmt.Println("version=" + v)
	const chick = "c-incluster"
	id, err := rt.Create(ctx, hatchery.ContainerSpec{
		Name: "mother-chick-" + chick + "-m-incluster", Image: os.Getenv("CHICK_IMAGE"), Command: []string{"echo", os.Getenv("CHICK_SAYS")},
		Env: []string{hatchery.EnvAddr + "=127.0.0.1:7777", hatchery.EnvToken + "=tok-incluster-0123456789abcdef", hatchery.EnvChickID + "=" + chick},
		Labels: map[string]string{
			hatchery.LabelChickID: chick, hatchery.LabelInstance: "m-incluster", hatchery.LabelChannel: "cli/local", hatchery.LabelTier: "local",
		},
		Network:   config.NetworkBridge,
		Resources: config.Resources{Memory: "64m", CPUs: 0.25, Tmpfs: "8m"},
		Hardening: config.Hardening{User: config.DefaultUser},
		Deadline:  2 * time.Minute, KillGrace: time.Second,
	})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	defer rt.Remove(context.Background(), id)
	wait := rt.Wait(ctx, id, true)
	if err := rt.Start(ctx, id); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	ex := <-wait
	if ex.Err != nil {
		return fmt.Errorf("wait: %w", ex.Err)
	}
	var logs bytes.Buffer
	if err := rt.Logs(ctx, id, false, &logs); err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	fmt.Printf("chick exit=%d log=%s", ex.Code, logs.String())
	if err := rt.Remove(ctx, id); err != nil {
		return fmt.Errorf("remove: %w", err)
	}
	left, err := rt.List(ctx, hatchery.LabelInstance, "m-incluster")
	if err != nil {
		return err
	}
	fmt.Printf("left=%d\n", len(left))
	return nil
}

// Command kubecluster brings the Kubernetes test cluster of package
// kubetest up and down by hand:
//
//	go run ./pkg/hatchery/kubernetes/kubetest/cmd/kubecluster up      # start (or find) it; print how to reach it
//	go run ./pkg/hatchery/kubernetes/kubetest/cmd/kubecluster status  # is it up and healthy?
//	go run ./pkg/hatchery/kubernetes/kubetest/cmd/kubecluster down    # tear it down, leaving the machine as it was
//
// A cluster brought up this way is used by the tests and left up by them.
// It needs root and the binaries .ci/ensure-kube builds.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/mother-chat/mother/pkg/hatchery/kubernetes/kubetest"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kubecluster up|down|status")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	switch os.Args[1] {
	case "up":
		k, err := kubetest.Up(ctx, kubetest.Options{Manual: true, Logf: logf})
		if err != nil {
			fmt.Fprintln(os.Stderr, "kubecluster:", err)
			os.Exit(1)
		}
		printCluster(k)
	case "status":
		k, err := kubetest.Status(ctx, "")
		if err != nil {
			fmt.Fprintln(os.Stderr, "kubecluster:", err)
			os.Exit(1)
		}
		printCluster(k)
	case "down":
		if err := kubetest.Down("", logf); err != nil {
			fmt.Fprintln(os.Stderr, "kubecluster:", err)
			os.Exit(1)
		}
	default:
		fmt.Fprintf(os.Stderr, "kubecluster: unknown command %q (up, down or status)\n", os.Args[1])
		os.Exit(2)
	}
}

func printCluster(k *kubetest.Kube) {
	fmt.Printf("server:      %s\nkubeconfig:  %s\nnode:        %s\ngateway:     %s (Pods reach the host here)\npod subnet:  %s\ncontainerd:  %s\nlogs:        %s/logs\n",
		k.Server, k.Kubeconfig, k.NodeName, k.GatewayIP, k.PodSubnet, k.ContainerdSocket, k.Dir)
}

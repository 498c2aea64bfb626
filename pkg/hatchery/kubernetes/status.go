package kubernetes

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/mother-chat/mother/pkg/hatchery"
)

// podExit is what a Pod's status says of its chick.
type podExit struct {
	// done: the chick's container has ended or will never run (Pods do
	// not restart).
	done bool
	// code is the container's exit code, -1 when unknown.
	code int64
	// ended says why Kubernetes ended it, when it did rather than the
	// chick (hatchery.Exit.Ended).
	ended string
}

// fatalWaiting are the reasons a container waits for ever: the kubelet
// will not start it without a change to the Pod or the node.
var fatalWaiting = map[string]string{
	"ErrImageNeverPull":          "its image is not on the node and imagePullPolicy is Never",
	"InvalidImageName":           "its image name is not valid",
	"CreateContainerConfigError": "its container's configuration is not valid",
}

// chickStatus finds the chick container's status.
func chickStatus(p *corev1.Pod) *corev1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == containerName {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// exitCode is the chick container's exit code, -1 while it has none.
func exitCode(p *corev1.Pod) int64 {
	cs := chickStatus(p)
	switch {
	case cs == nil:
		return -1
	case cs.State.Terminated != nil:
		return int64(cs.State.Terminated.ExitCode)
	case cs.LastTerminationState.Terminated != nil:
		return int64(cs.LastTerminationState.Terminated.ExitCode)
	}
	return -1
}

// disruption is the Pod's DisruptionTarget condition, if true.
func disruption(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		c := &p.Status.Conditions[i]
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

func withMessage(what, reason, msg string) string {
	msg = strings.TrimSpace(msg)
	switch {
	case reason != "" && msg != "":
		return fmt.Sprintf("%s (%s: %s)", what, reason, msg)
	case reason != "":
		return fmt.Sprintf("%s (%s)", what, reason)
	case msg != "":
		return fmt.Sprintf("%s (%s)", what, msg)
	}
	return what
}

// exitOf reads a Pod's status: whether its chick is done, its exit code,
// and why Kubernetes ended it (evicted, past its deadline, its node lost,
// a container that can never start).
func exitOf(p *corev1.Pod) podExit {
	code := exitCode(p)
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		return podExit{done: true, code: code}
	case corev1.PodFailed:
		e := podExit{done: true, code: code}
		switch p.Status.Reason {
		case "":
			if d := disruption(p); d != nil {
				e.ended = withMessage("its Pod was disrupted", d.Reason, d.Message)
			}
		case "Evicted":
			e.ended = withMessage("evicted", "", p.Status.Message)
		case "DeadlineExceeded":
			e.ended = "it ran past its Pod's activeDeadlineSeconds"
		default:
			e.ended = withMessage("its Pod failed", p.Status.Reason, p.Status.Message)
		}
		return e
	case corev1.PodUnknown:
		return podExit{done: true, code: code, ended: "its node stopped reporting on it (phase Unknown)"}
	}
	if p.Status.Reason == "NodeLost" {
		return podExit{done: true, code: code, ended: withMessage("its node was lost", "", p.Status.Message)}
	}
	if d := disruption(p); d != nil && (d.Reason == "DeletionByTaintManager" || d.Reason == "DeletionByPodGC") {
		// Its node went away or became unreachable: the kubelet may never
		// confirm the end.
		return podExit{done: true, code: code, ended: withMessage("its node was lost", d.Reason, d.Message)}
	}
	if cs := chickStatus(p); cs != nil && cs.State.Waiting != nil {
		if why, ok := fatalWaiting[cs.State.Waiting.Reason]; ok {
			return podExit{done: true, code: -1, ended: withMessage("its container could not start: "+why, cs.State.Waiting.Reason, cs.State.Waiting.Message)}
		}
	}
	return podExit{code: code}
}

// unconfirmed is how long after a deleted Pod's grace has run out its
// node may take to confirm the end before the chick counts as lost.
const unconfirmed = 30 * time.Second

// lostAt is when a Pod being deleted counts as lost because its node did
// not confirm its end; zero while it is not being deleted.
func lostAt(p *corev1.Pod) time.Time {
	if p == nil || p.DeletionTimestamp == nil {
		return time.Time{}
	}
	return p.DeletionTimestamp.Add(unconfirmed)
}

// state is a Pod's state in the runtime's words: "running" from creation
// (Kubernetes starts a Pod when it is made; a Pending one is on its way),
// "exited" once it is done. A Secret without its Pod is "created"
// (Create made it; Start has not).
func state(p *corev1.Pod) string {
	if exitOf(p).done {
		return "exited"
	}
	return hatchery.ContainerRunning
}

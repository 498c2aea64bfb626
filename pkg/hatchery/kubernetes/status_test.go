package kubernetes

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestExitOf reads the Pod states a single-node test cluster cannot make
// on demand (evicted, past its deadline, its node lost) as the API
// reports them.
func TestExitOf(t *testing.T) {
	t.Parallel()
	terminated := func(code int32) []corev1.ContainerStatus {
		return []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}}
	}
	waiting := func(reason, msg string) []corev1.ContainerStatus {
		return []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}
	}
	for _, tc := range []struct {
		name  string
		st    corev1.PodStatus
		done  bool
		code  int64
		ended string
	}{
		{"pending", corev1.PodStatus{Phase: corev1.PodPending}, false, -1, ""},
		{"pulling", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: waiting("ContainerCreating", "")}, false, -1, ""},
		{"running", corev1.PodStatus{Phase: corev1.PodRunning}, false, -1, ""},
		{"succeeded", corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: terminated(0)}, true, 0, ""},
		{"failed by itself", corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: terminated(2)}, true, 2, ""},
		{"evicted", corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory."}, true, -1, "evicted (The node was low on resource: memory.)"},
		{"deadline", corev1.PodStatus{Phase: corev1.PodFailed, Reason: "DeadlineExceeded", ContainerStatuses: terminated(137)}, true, 137, "activeDeadlineSeconds"},
		{"preempted", corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: terminated(143), Conditions: []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "PreemptionByScheduler", Message: "preempted"}}}, true, 143, "disrupted (PreemptionByScheduler: preempted)"},
		{"node lost, taint manager", corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByTaintManager", Message: "Taint manager: deleting due to NoExecute taint"}}}, true, -1, "its node was lost (DeletionByTaintManager"},
		{"node lost, old reason", corev1.PodStatus{Phase: corev1.PodRunning, Reason: "NodeLost"}, true, -1, "its node was lost"},
		{"unknown", corev1.PodStatus{Phase: corev1.PodUnknown}, true, -1, "phase Unknown"},
		{"image never pulled", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: waiting("ErrImageNeverPull", "not present")}, true, -1, "could not start: its image is not on the node"},
		{"image backing off", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: waiting("ImagePullBackOff", "")}, false, -1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := exitOf(&corev1.Pod{Status: tc.st})
			if e.done != tc.done || e.code != tc.code || (tc.ended == "") != (e.ended == "") || !strings.Contains(e.ended, tc.ended) {
				t.Errorf("exitOf = %+v, want done %v code %d ended containing %q", e, tc.done, tc.code, tc.ended)
			}
		})
	}
}

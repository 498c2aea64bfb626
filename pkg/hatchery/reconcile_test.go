package hatchery

import (
	"reflect"
	"testing"
	"time"
)

func TestPlan(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	ctr := func(id, chick, state string) Container {
		labels := map[string]string{LabelInstance: "m-1"}
		if chick != "" {
			labels[LabelChickID] = chick
		}
		return Container{ID: id, State: state, Labels: labels}
	}
	rec := func(id string, st State, mod func(*Record)) knownChick {
		r := Record{ID: id, State: st, Host: "local"}
		if mod != nil {
			mod(&r)
		}
		return knownChick{Record: r, Restored: true}
	}
	withToken := func(r *Record) { r.TokenHash = "h" }
	tests := []struct {
		name     string
		records  []knownChick
		observed []observedHost
		want     []action
	}{
		{
			name:     "nothing anywhere",
			observed: []observedHost{{Name: "local"}},
		},
		{
			name:     "a container of no known chick is reaped",
			observed: []observedHost{{Name: "local", Containers: []Container{ctr("k1", "c-gone", "exited")}}},
			want:     []action{{Kind: actReap, Host: "local", Container: "k1", Chick: "c-gone"}},
		},
		{
			name:     "a chick spawned by this process is left alone",
			records:  []knownChick{{Record: Record{ID: "c-new", State: StateStarting}}},
			observed: []observedHost{{Name: "local", Containers: []Container{ctr("k1", "c-new", "created")}}},
		},
		{
			name:     "a running chick with a token is resumed",
			records:  []knownChick{rec("c-1", StateRunning, withToken)},
			observed: []observedHost{{Name: "local", Containers: []Container{ctr("k1", "c-1", ContainerRunning)}}},
			want:     []action{{Kind: actResume, Chick: "c-1", Host: "local", Container: "k1"}},
		},
		{
			name:     "a running chick that was stopping is ended, not resumed",
			records:  []knownChick{rec("c-1", StateStopping, withToken)},
			observed: []observedHost{{Name: "local", Containers: []Container{ctr("k1", "c-1", ContainerRunning)}}},
			want:     []action{{Kind: actEnd, Chick: "c-1", Host: "local", Container: "k1", Reason: ReasonLost, Outcome: outcomeLostStopped}},
		},
		{
			name:     "a running container without a token is ended",
			records:  []knownChick{rec("c-1", StateRunning, nil)},
			observed: []observedHost{{Name: "local", Containers: []Container{ctr("k1", "c-1", ContainerRunning)}}},
			want:     []action{{Kind: actEnd, Chick: "c-1", Host: "local", Container: "k1", Reason: ReasonLost, Outcome: outcomeLostStopped}},
		},
		{
			name:     "a container created but never started: the chick is queued again and the container reaped",
			records:  []knownChick{rec("c-1", StateStarting, withToken)},
			observed: []observedHost{{Name: "local", Containers: []Container{ctr("k1", "c-1", ContainerCreated)}}},
			want: []action{
				{Kind: actRequeue, Chick: "c-1", Host: "local", Container: "k1", ClearContainer: true},
				{Kind: actReap, Host: "local", Container: "k1", Chick: "c-1"},
			},
		},
		{
			name:     "an exited chick with a stored result ends with it",
			records:  []knownChick{rec("c-1", StateRunning, func(r *Record) { r.TokenHash = "h"; r.Result = &Result{Text: "ok"} })},
			observed: []observedHost{{Name: "local", Containers: []Container{ctr("k1", "c-1", "exited")}}},
			want:     []action{{Kind: actEnd, Chick: "c-1", Host: "local", Container: "k1", WithResult: true}},
		},
		{
			name: "ended chicks: removed or past their keep are reaped, the others kept",
			records: []knownChick{
				rec("c-1", StateDone, func(r *Record) { r.Removed = true }),
				rec("c-2", StateDone, func(r *Record) { r.KeepUntil = now.Add(time.Hour) }),
				rec("c-3", StateFailed, func(r *Record) { r.KeepUntil = now }),
				rec("c-4", StateKilled, nil),
			},
			observed: []observedHost{{Name: "local", Containers: []Container{
				ctr("k4", "c-4", "exited"), ctr("k3", "c-3", "exited"), ctr("k2", "c-2", "exited"), ctr("k1", "c-1", "exited"),
			}}},
			want: []action{
				{Kind: actKeep, Chick: "c-2", Host: "local", After: time.Hour},
				{Kind: actReap, Host: "local", Container: "k1", Chick: "c-1", MarkRemoved: true},
				{Kind: actReap, Host: "local", Container: "k3", Chick: "c-3", MarkRemoved: true},
				{Kind: actReap, Host: "local", Container: "k4", Chick: "c-4", MarkRemoved: true},
			},
		},
		{
			name: "chicks without a container: queued ones wait again, started ones are lost",
			records: []knownChick{
				rec("c-1", StateQueued, nil),
				rec("c-2", StateStarting, withToken),
				rec("c-3", StateRunning, func(r *Record) { r.TokenHash = "h"; r.ContainerID = "k3" }),
				rec("c-4", StateStarting, func(r *Record) { r.ContainerID = "k4" }),
			},
			observed: []observedHost{{Name: "local"}},
			want: []action{
				{Kind: actRequeue, Chick: "c-1"},
				{Kind: actRequeue, Chick: "c-2"},
				{Kind: actEnd, Chick: "c-3", Reason: ReasonLost, Outcome: outcomeLostGone},
				{Kind: actEnd, Chick: "c-4", Reason: ReasonLost, Outcome: outcomeLostGone},
			},
		},
		{
			name: "the chicks of a host that did not answer wait for it",
			records: []knownChick{
				rec("c-1", StateRunning, func(r *Record) { r.Host = "gpu"; r.ContainerID = "k1" }),
				rec("c-2", StateRunning, func(r *Record) { r.ContainerID = "k2" }),
			},
			observed: []observedHost{{Name: "local"}, {Name: "gpu", Failed: true}},
			want: []action{
				{Kind: actDetach, Chick: "c-1", Host: "gpu"},
				{Kind: actEnd, Chick: "c-2", Reason: ReasonLost, Outcome: outcomeLostGone},
			},
		},
		{
			name:    "unlabelled and duplicate containers are strays, reaped last",
			records: []knownChick{rec("c-1", StateDone, func(r *Record) { r.Removed = true })},
			observed: []observedHost{
				{Name: "local", Containers: []Container{ctr("k0", "", "exited"), ctr("k1", "c-1", "exited")}},
				{Name: "gpu", Containers: []Container{ctr("k2", "c-1", "exited")}},
			},
			want: []action{
				{Kind: actReap, Host: "local", Container: "k1", Chick: "c-1", MarkRemoved: true},
				{Kind: actReap, Host: "local", Container: "k0", Stray: true},
				{Kind: actReap, Host: "gpu", Container: "k2", Chick: "c-1", Stray: true},
			},
		},
		{
			name: "ends never reported are announced, oldest first",
			records: []knownChick{
				rec("c-a", StateDone, func(r *Record) { r.Unreported = true; r.Removed = true; r.EndedAt = now.Add(-time.Minute) }),
				rec("c-b", StateFailed, func(r *Record) { r.Unreported = true; r.Removed = true; r.EndedAt = now.Add(-time.Hour) }),
				rec("c-c", StateDone, func(r *Record) { r.Removed = true; r.EndedAt = now.Add(-2 * time.Hour) }),
				{Record: Record{ID: "c-d", State: StateDone, Unreported: true}},
			},
			observed: []observedHost{{Name: "local"}},
			want:     []action{{Kind: actAnnounce, Chick: "c-b"}, {Kind: actAnnounce, Chick: "c-a"}},
		},
		{
			name: "record changes, keeps, reaps, ends, resumes, then announcements",
			records: []knownChick{
				rec("c-1", StateRunning, withToken),
				rec("c-2", StateQueued, nil),
				rec("c-3", StateDone, func(r *Record) { r.KeepUntil = now.Add(time.Minute); r.Unreported = true }),
				rec("c-4", StateRunning, func(r *Record) { r.ContainerID = "k4" }),
			},
			observed: []observedHost{{Name: "local", Containers: []Container{
				ctr("k1", "c-1", ContainerRunning), ctr("k3", "c-3", "exited"), ctr("k9", "c-9", "exited"),
			}}},
			want: []action{
				{Kind: actRequeue, Chick: "c-2"},
				{Kind: actKeep, Chick: "c-3", Host: "local", After: time.Minute},
				{Kind: actReap, Host: "local", Container: "k9", Chick: "c-9"},
				{Kind: actEnd, Chick: "c-4", Reason: ReasonLost, Outcome: outcomeLostGone},
				{Kind: actResume, Chick: "c-1", Host: "local", Container: "k1"},
				{Kind: actAnnounce, Chick: "c-3"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := plan(tc.records, tc.observed, now)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("plan() =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

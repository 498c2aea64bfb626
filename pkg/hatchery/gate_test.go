package hatchery

import (
	"reflect"
	"testing"
)

func TestPlanGates(t *testing.T) {
	t.Parallel()
	gate := func(id, of string) Container {
		return Container{ID: id, State: ContainerRunning, Labels: map[string]string{LabelInstance: "m-1", LabelGate: "m-1", LabelGateHost: of}}
	}
	tests := []struct {
		name       string
		isolated   bool
		configured []string
		observed   []observedHost
		want       []gateAction
	}{
		{
			name: "isolated: every host that answers gets its gate ensured", isolated: true,
			configured: []string{"gpu1", "gpu2"},
			observed:   []observedHost{{Name: "gpu1", Gates: []Container{gate("g1", "gpu1")}}, {Name: "gpu2"}},
			want:       []gateAction{{Kind: gateEnsure, Host: "gpu1"}, {Kind: gateEnsure, Host: "gpu2"}},
		},
		{
			name: "isolated: a host that does not answer is left for later", isolated: true,
			configured: []string{"gpu1", "gpu2"},
			observed:   []observedHost{{Name: "gpu1", Failed: true}, {Name: "gpu2"}},
			want:       []gateAction{{Kind: gateEnsure, Host: "gpu2"}},
		},
		{
			name: "isolated: the gate of a host no longer configured goes first", isolated: true,
			configured: []string{"gpu2"},
			observed:   []observedHost{{Name: "gpu2", Gates: []Container{gate("g1", "gpu1")}}},
			want:       []gateAction{{Kind: gateRemove, Host: "gpu2", Container: "g1", Of: "gpu1"}, {Kind: gateEnsure, Host: "gpu2"}},
		},
		{
			name: "isolated: the gate of another configured host on the same engine is left to EnsureGate", isolated: true,
			configured: []string{"a", "b"},
			observed:   []observedHost{{Name: "a", Gates: []Container{gate("g1", "b")}}},
			want:       []gateAction{{Kind: gateEnsure, Host: "a"}},
		},
		{
			name: "isolated: a host whose runtime confines chicks itself gets no gate", isolated: true,
			configured: []string{"box", "cluster"},
			observed:   []observedHost{{Name: "box"}, {Name: "cluster", SelfIsolated: true}},
			want:       []gateAction{{Kind: gateEnsure, Host: "box"}},
		},
		{
			name:       "not isolated: gates and volumes go, on every host that answers",
			configured: []string{"gpu1", "gpu2", "gpu3"},
			observed:   []observedHost{{Name: "gpu1", Gates: []Container{gate("g1", "gpu1")}}, {Name: "gpu2"}, {Name: "gpu3", Failed: true}},
			want:       []gateAction{{Kind: gateRemoveAll, Host: "gpu1"}, {Kind: gateRemoveAll, Host: "gpu2"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := planGates(tc.isolated, tc.configured, tc.observed)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("planGates = %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestSplitGates(t *testing.T) {
	t.Parallel()
	list := []Container{
		{ID: "c1", Labels: map[string]string{LabelInstance: "m-1", LabelChickID: "c-1"}},
		{ID: "g1", Labels: map[string]string{LabelInstance: "m-1", LabelGate: "m-1"}},
		{ID: "s1", Labels: map[string]string{LabelInstance: "m-1"}},
	}
	chicks, gates := splitGates(list)
	if len(chicks) != 2 || chicks[0].ID != "c1" || chicks[1].ID != "s1" || len(gates) != 1 || gates[0].ID != "g1" {
		t.Errorf("splitGates = %+v, %+v", chicks, gates)
	}
}

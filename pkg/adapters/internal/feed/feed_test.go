package feed

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestQueueKeepsOrder(t *testing.T) {
	q := NewQueue()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { q.Run(ctx); close(done) }()
	var mu sync.Mutex
	var got []int
	all := make(chan struct{})
	for i := range 100 {
		q.Push(func(context.Context) {
			mu.Lock()
			got = append(got, i)
			n := len(got)
			mu.Unlock()
			if n == 100 {
				close(all)
			}
		})
	}
	<-all
	cancel()
	<-done
	for i, v := range got {
		if v != i {
			t.Fatalf("job %d ran as number %d", v, i)
		}
	}
}

func TestSeenIsBounded(t *testing.T) {
	s := NewSeen(3)
	for i := range 5 {
		if !s.Add(fmt.Sprint(i)) {
			t.Fatalf("Add(%d) reported a duplicate", i)
		}
	}
	if s.Add("4") {
		t.Errorf("Add(4) twice reported new")
	}
	if !s.Add("0") {
		t.Errorf("0 was not forgotten after 3 newer ids")
	}
}

func TestBackoffGrowsToMax(t *testing.T) {
	b := Backoff{Min: time.Second, Max: 8 * time.Second}
	var got []time.Duration
	for range 6 {
		got = append(got, b.Next())
	}
	want := []time.Duration{1, 2, 4, 8, 8, 8}
	for i, w := range want {
		w *= time.Second
		if got[i] < w || got[i] > w+w/5 {
			t.Errorf("wait %d = %v, want %v plus at most 20%%", i, got[i], w)
		}
	}
	b.Reset()
	if d := b.Next(); d > 1200*time.Millisecond {
		t.Errorf("after Reset wait = %v", d)
	}
}

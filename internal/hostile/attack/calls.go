package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// callsFlags are the flags of attack calls.
type callsFlags struct {
	images, imageBytes, textBytes int
	parallel, rounds              int
	system                        string
	maxOut                        int
}

func (f *callsFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.images, "images", 12, "calls: images per call")
	fs.IntVar(&f.imageBytes, "image-bytes", 5<<20, "calls: bytes of each image")
	fs.IntVar(&f.textBytes, "text-bytes", 0, "calls: bytes of text besides the images")
	fs.IntVar(&f.parallel, "parallel", 2, "calls: calls at once")
	fs.IntVar(&f.rounds, "rounds", 3, "calls: calls each of the parallel senders makes, one after the other")
}

// calls sends model calls carrying images: -parallel senders each make
// -rounds calls of -images images of -image-bytes random bytes (and
// -text-bytes of text). It prints "CALLS <label> answered=<n>
// refused=<n>" and, for each distinct refusal, "CALLSERR <label>
// <code: message>".
func calls(c *creds, label string, f callsFlags) {
	img := make([]byte, f.imageBytes)
	rand.Read(img)
	req := &pb.GenerateRequest{System: f.system, MaxOutputTokens: int32(max(f.maxOut, 16))}
	msg := &pb.ModelMessage{Role: pb.Role_ROLE_USER, Content: "look " + strings.Repeat("x", f.textBytes)}
	for range f.images {
		// The same bytes each time: what a chick re-sending its
		// context's images would send.
		msg.Images = append(msg.Images, &pb.ModelImage{MimeType: "image/png", Data: img})
	}
	req.Messages = []*pb.ModelMessage{msg}
	var mu sync.Mutex
	answered, refused := 0, 0
	errs := map[string]int{}
	var wg sync.WaitGroup
	for range f.parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range f.rounds {
				err := c.generateReq(req)
				mu.Lock()
				if err != nil {
					refused++
					errs[oneLine(err)]++
				} else {
					answered++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	fmt.Printf("CALLS %s answered=%d refused=%d\n", label, answered, refused)
	lines := make([]string, 0, len(errs))
	for e, n := range errs {
		lines = append(lines, fmt.Sprintf("CALLSERR %s %dx %s", label, n, e))
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
}

// generateReq makes one call of req and waits for its end.
func (c *creds) generateReq(req *pb.GenerateRequest) error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	st, err := c.client.Generate(c.ctx(ctx), req)
	if err != nil {
		return err
	}
	for {
		m, err := st.Recv()
		if err != nil {
			return err
		}
		if m.GetDone() != nil {
			return nil
		}
	}
}

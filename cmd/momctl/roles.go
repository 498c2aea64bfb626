package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	pb "github.com/mother-chat/mother/proto/mother/v1"
)

type roleJSON struct {
	Adapter string   `json:"adapter"`
	Channel string   `json:"channel,omitempty"`
	Role    string   `json:"role"`
	Who     []string `json:"who"`
	May     []string `json:"may"`
}

type refusalJSON struct {
	Time     time.Time `json:"time"`
	Adapter  string    `json:"adapter"`
	Channel  string    `json:"channel"`
	User     string    `json:"user"`
	Perm     string    `json:"perm"`
	Sentence string    `json:"sentence"`
}

type rolesJSON struct {
	Roles    []roleJSON    `json:"roles"`
	Refusals []refusalJSON `json:"refusals"`
}

// roles shows who has which role (config.json's roles table, the
// adapters' admins) and the latest refusals.
func (c *cli) roles(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("roles", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := c.parse(fs, args); err != nil {
		return usageError{"roles [--json]"}
	}
	var resp *pb.ListRolesResponse
	err := c.do(ctx, 10*time.Second, func(ctx context.Context, api pb.AdminServiceClient) (err error) {
		resp, err = api.ListRoles(ctx, &pb.ListRolesRequest{})
		return err
	})
	if err != nil {
		return err
	}
	out := rolesJSON{Roles: []roleJSON{}, Refusals: []refusalJSON{}}
	for _, r := range resp.GetAssignments() {
		out.Roles = append(out.Roles, roleJSON{Adapter: r.GetAdapter(), Channel: r.GetChannel(), Role: r.GetRole(), Who: nonNil(r.GetWho()), May: nonNil(r.GetMay())})
	}
	for _, f := range resp.GetRefusals() {
		out.Refusals = append(out.Refusals, refusalJSON{Time: f.GetTime().AsTime(), Adapter: f.GetAdapter(), Channel: f.GetChannel(), User: f.GetUser(), Perm: f.GetPerm(), Sentence: f.GetSentence()})
	}
	now := c.clock.Now()
	return c.print(*asJSON, out, func(w io.Writer) error { return rolesText(w, out, now) })
}

func nonNil(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

// rolesText is momctl roles for a person.
func rolesText(w io.Writer, r rolesJSON, now time.Time) error {
	if len(r.Roles) == 0 {
		fmt.Fprintln(w, "no adapters")
	}
	last := ""
	for _, a := range r.Roles {
		where := a.Adapter
		if a.Channel != "" {
			where += "/" + a.Channel
		}
		if where != last {
			fmt.Fprintln(w, where+":")
			last = where
		}
		may := strings.Join(a.May, " ")
		if may == "" {
			may = "nothing"
		}
		fmt.Fprintf(w, "  %-8s %s (may: %s)\n", a.Role, strings.Join(a.Who, ", "), may)
	}
	fmt.Fprintln(w)
	if len(r.Refusals) == 0 {
		fmt.Fprintln(w, "no refusals since Mother started")
		return nil
	}
	fmt.Fprintln(w, "refused recently (newest last):")
	for _, f := range r.Refusals {
		fmt.Fprintf(w, "  %s ago  %s/%s  %s  %s: %s\n", age(now.Sub(f.Time)), f.Adapter, f.Channel, f.User, f.Perm, f.Sentence)
	}
	return nil
}

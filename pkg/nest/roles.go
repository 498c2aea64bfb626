package nest

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// ListRoles says who has which role and what was refused recently.
func (a *adminService) ListRoles(context.Context, *pb.ListRolesRequest) (*pb.ListRolesResponse, error) {
	out := &pb.ListRolesResponse{}
	r := a.s.roleSource()
	if r == nil {
		return out, nil
	}
	for _, ra := range r.RoleAssignments() {
		out.Assignments = append(out.Assignments, &pb.RoleAssignment{Adapter: ra.Adapter, Channel: ra.Channel, Role: ra.Role, Who: ra.Who, May: ra.May})
	}
	for _, f := range r.RecentRefusals() {
		out.Refusals = append(out.Refusals, &pb.RoleRefusal{Time: timestamppb.New(f.Time), Adapter: f.Adapter, Channel: f.Channel, User: f.User, Perm: f.Perm, Sentence: f.Sentence})
	}
	return out, nil
}

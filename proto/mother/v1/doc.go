// Package motherv1 is the generated gRPC API between Mother, her chicks
// (ChickService) and momctl (AdminService); see chick.proto, admin.proto and the
// shared types.proto.
// Regenerate with `make proto`; `make check` proves the committed code is
// current.
package motherv1

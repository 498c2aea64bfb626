// Package motherv1 is the generated gRPC API between Mother, her chicks
// (ChickService) and momctl (AdminService); see chick.proto and admin.proto.
// Regenerate with `make proto`; `make check` proves the committed code is
// current.
package motherv1

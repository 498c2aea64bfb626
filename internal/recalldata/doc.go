// Package recalldata is a test data set for Mother's recall (search over
// a channel's history): a deterministic, generated chat history with
// questions whose answers are known (History), a deterministic stand-in
// for a text embedding model (Embed), and the measure of a search over
// them (RecallAt). Tests and benchmarks use it; the daemon does not.
package recalldata

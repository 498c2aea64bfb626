package wire

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// Limits of FetchFiles, the files a chick receives at start. Both sides
// hold to them: Mother refuses to send more, the chick to receive more.
const (
	// MaxFetchBytes caps the content of all the files of one fetch.
	MaxFetchBytes = 1 << 30
	// FetchChunkBytes is the largest data message of a fetch (far below
	// gRPC's message limits).
	FetchChunkBytes = 256 << 10
	// MaxFetchPathBytes caps the length of one entry's path.
	MaxFetchPathBytes = 4096
)

// FetchedMarker is the workspace file a chick writes once it has its
// files: a chick that starts again on the same workspace (a restarted
// process, a restarted container of the same Pod) keeps what it changed
// instead of fetching again. No fetched entry may have this path.
const FetchedMarker = ".mother-fetched"

// CheckWorkspacePath checks a path of a workspace entry: relative,
// slash-separated, with no empty, "." or ".." element, no NUL, no
// backslash, not the marker, and at most MaxFetchPathBytes long. Joined to
// any directory, a path it accepts stays under that directory (links
// aside: the writer refuses to follow those).
func CheckWorkspacePath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty path")
	case len(p) > MaxFetchPathBytes:
		return fmt.Errorf("path longer than %d bytes", MaxFetchPathBytes)
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("path %q is absolute", p)
	case strings.ContainsAny(p, "\x00\\"):
		return fmt.Errorf("path %q holds a NUL or a backslash", p)
	case p == FetchedMarker:
		return fmt.Errorf("path %q is reserved", p)
	}
	for _, el := range strings.Split(p, "/") {
		switch el {
		case "":
			return fmt.Errorf("path %q has an empty element", p)
		case ".", "..":
			return fmt.Errorf("path %q has a %q element", p, el)
		}
	}
	return nil
}

// WorkspaceEntryToProto builds a fetched entry: a directory, or a file of
// size bytes.
func WorkspaceEntryToProto(path string, dir bool, size int64, executable bool, mod time.Time) *pb.WorkspaceEntry {
	e := &pb.WorkspaceEntry{Path: path, Kind: pb.WorkspaceEntryKind_WORKSPACE_ENTRY_KIND_FILE, Size: size, Executable: executable}
	if dir {
		e.Kind, e.Size, e.Executable = pb.WorkspaceEntryKind_WORKSPACE_ENTRY_KIND_DIR, 0, false
	}
	if !mod.IsZero() {
		e.ModTime = timestamppb.New(mod)
	}
	return e
}

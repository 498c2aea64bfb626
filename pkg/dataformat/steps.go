package dataformat

// Step moves a data directory from one format to the next.
type Step struct {
	// From and To are the formats (To is From+1).
	From, To int
	// Changes says what the step changes, in a sentence, for
	// mother --check-config and the docs.
	Changes string
	// Files lists the files the step changes, relative to the data
	// directory, whether they exist or not (nil: none). They are
	// snapshotted before Up runs; a rollback restores them as they were
	// (one that did not exist is removed).
	Files func(dir string) ([]string, error)
	// Up changes the files. It starts from them as Files listed them (a
	// retry after a crash starts from the restored snapshot). The format
	// file is written after it returns, by the caller.
	Up func(dir string) error
}

// steps is every step, in order: steps[i] goes from format i to i+1.
//
// 0→1 (Mother 0.2.0) changes no store: every file of Mother 0.1 reads the
// same in 0.2 (the records 0.2 writes only add fields, which 0.1 reads
// past). The step exists so that the format file is written, and 0.1 is
// its rollback's target: removing the file is all it takes.
var steps = []Step{
	{From: 0, To: 1, Changes: "writes state/format.json; no file of Mother 0.1 changes", Up: func(string) error { return nil }},
}

// Steps is a copy of the table of steps, for the docs and --check-config.
func Steps() []Step { return append([]Step(nil), steps...) }

// stepFrom is the step from format f (false: none).
func stepFrom(f int) (Step, bool) {
	for _, s := range steps {
		if s.From == f {
			return s, true
		}
	}
	return Step{}, false
}

// files is what s changes in dir (none for a nil Files).
func (s Step) files(dir string) ([]string, error) {
	if s.Files == nil {
		return nil, nil
	}
	return s.Files(dir)
}

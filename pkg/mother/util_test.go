package mother

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/mother-chat/mother/pkg/model"
)

func specOf(name string) model.ToolSpec {
	return model.ToolSpec{Name: name, Description: name, Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readDirNames(dir string) ([]string, error) {
	es, err := os.ReadDir(dir)
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out, err
}

package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mother-chat/mother/internal/powercut"
	"github.com/mother-chat/mother/internal/testenv"
	"github.com/mother-chat/mother/pkg/adapters/telegram/telegramtest"
	"github.com/mother-chat/mother/pkg/metrics"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/statuspage"
)

// The disk tests run the real mother with her data directory on a
// filesystem that fills (a 4 MiB tmpfs) or fails (internal/powercut
// injecting EIO), on the fake Telegram, whose update offsets show what
// Mother acknowledged, with a scripted Ollama.

// mountTmpfs mounts a tmpfs of size (mount(8)'s "4m") on a new directory
// and unmounts it when the test ends (after the tests' own cleanups,
// which stop Mother first).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		testenv.Unavailable(t, "mounting a tmpfs needs root")
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size="+size+",mode=0700"); err != nil {
		testenv.Unavailable(t, "cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return dir
}

// fill writes path until the filesystem has no room left.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			t.Fatal(err)
		}
	}
	// What a partial page left: fill it byte by byte.
	for {
		if _, err := f.Write(buf[:512]); err != nil {
			break
		}
	}
}

// diskModel answers "please spawn" with a spawn_chick call and then says
// what the tool answered, and greets otherwise.
func diskModel() *ollamatest.Server {
	return ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		last := r.Messages[len(r.Messages)-1]
		switch {
		case last.Role == "tool":
			return ollamatest.Turn{Text: "The chick: " + last.Content}
		case strings.Contains(r.LastUser(), "please spawn"):
			return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "spawn_chick", Args: map[string]any{"goal": "count the files"}}}}
		}
		return ollamatest.Turn{Text: "Hello, @mario!"}
	})
}

// health reads /healthz.
func health(t *testing.T, base string) (int, metrics.Health) {
	t.Helper()
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		return 0, metrics.Health{}
	}
	defer resp.Body.Close()
	var h metrics.Health
	json.NewDecoder(resp.Body).Decode(&h)
	return resp.StatusCode, h
}

// tgAdminDMs are Mother's messages in her private chat with Mario, the
// admin.
func tgAdminDMs(fake *telegramtest.Server) []string {
	var out []string
	for _, m := range fake.BotMessages(tgMario.ID, 0) {
		out = append(out, m.Shown())
	}
	return out
}

func countWith(ss []string, prefix string) int {
	n := 0
	for _, s := range ss {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// tgAnswers are Mother's final messages in the group answering trigger.
func tgAnswers(fake *telegramtest.Server, trigger int) []string {
	var out []string
	for _, m := range fake.BotMessages(tgGroup.ID, 0) {
		if m.ReplyTo == trigger && !m.Button && !m.Deleted {
			out = append(out, m.Shown())
		}
	}
	return out
}

// TestDiskFull: the real mother on a 4 MiB tmpfs that fills up. A message
// that cannot be stored is not answered and not acknowledged to Telegram
// (its update offset stays unconfirmed), the channel is told once, the
// admin once by DM ("disk full: ..."), /healthz and the status page say
// the disk is full. With a little room (less than the probe needs) the
// message comes back and is answered once, but a chick is refused, the
// disk still counted full. With room again, the probe ends it: /healthz
// is fine, the admin is told once that the disk is ok again, and Mother
// answers as before. She never exits.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	data := mountTmpfs(t, "4m")
	model := diskModel()
	defer model.Close()
	fake := newTelegramFake(t)
	listen := freePort(t)
	cfg := telegramConfig(fake, model)
	cfg["metrics"] = map[string]any{"listen": listen}
	d := startDaemon(t, data, cfg)
	base := "http://" + listen
	waitFor(t, "mother to connect", tgPolling(fake, 1))
	first := fake.Post(tgGroup.ID, tgMario.ID, "@mother_bot hello")
	waitFor(t, "the first answer", func() bool { return len(tgAnswers(fake, first)) == 1 })

	filler := filepath.Join(data, "filler")
	fill(t, filler)
	// Longer than a page: its log line cannot fit in what the last page
	// of log.jsonl has left (a full filesystem still takes writes into
	// pages a file has already).
	spawnText := "@mother_bot please spawn a chick to count the files" + strings.Repeat(" and again", 400)
	spawnID := fake.NextUpdateID()
	spawn := fake.Post(tgGroup.ID, tgMario.ID, spawnText)
	waitForWithin(t, "the admin told the disk is full", 30*time.Second, func() bool { return countWith(tgAdminDMs(fake), "disk full: ") == 1 })
	waitForWithin(t, "/healthz degraded", 15*time.Second, func() bool {
		code, h := health(t, base)
		return code == http.StatusServiceUnavailable && h.Status == "degraded" && strings.HasPrefix(h.Disk, "disk full: ")
	})
	_, h := health(t, base)
	if !strings.Contains(h.Reason, "disk full: ") || !strings.Contains(h.Reason, "no space left on device") {
		t.Errorf("/healthz reason %q", h.Reason)
	}
	var snap statuspage.Snapshot
	resp, err := http.Get(base + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&snap)
	resp.Body.Close()
	if snap.Disk == nil || snap.Disk.State != "full" || !strings.HasPrefix(snap.Disk.Error, "disk full: ") {
		t.Errorf("status.json disk: %+v", snap.Disk)
	}
	next := fake.Post(tgGroup.ID, tgMario.ID, "@mother_bot hello again")
	time.Sleep(3 * time.Second) // an answer or an acknowledgement would come now
	if got := tgAnswers(fake, spawn); len(got) != 0 {
		t.Fatalf("answered on a full disk: %q", got)
	}
	if c := fake.Confirmed(); c >= spawnID {
		t.Fatalf("Telegram holds update %d as handled (confirmed %d) though Mother could not store it", spawnID, c)
	}
	notices := 0
	for _, m := range fake.BotMessages(tgGroup.ID, 0) {
		if strings.Contains(m.Shown(), "I cannot store messages right now (my disk is full)") {
			notices++
		}
	}
	if notices != 1 {
		t.Errorf("the group was told %d times that messages cannot be stored, want once", notices)
	}
	if n := countWith(tgAdminDMs(fake), "disk full: "); n != 1 {
		t.Errorf("the admin was told %d times, want once: %q", n, tgAdminDMs(fake))
	}

	// A little room: less than the probe writes, so the disk still
	// counts as full, but a message fits.
	st, err := os.Stat(filler)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filler, st.Size()-48<<10); err != nil {
		t.Fatal(err)
	}
	waitForWithin(t, "the held message answered", time.Minute, func() bool { return len(tgAnswers(fake, spawn)) >= 1 })
	waitForWithin(t, "the next message answered", 30*time.Second, func() bool { return len(tgAnswers(fake, next)) >= 1 })
	if got := tgAnswers(fake, spawn); len(got) != 1 || !strings.Contains(got[0], "Not started") || !strings.Contains(got[0], "disk full") {
		t.Errorf("answers to the spawn request: %q; want one, the chick refused for the full disk", got)
	}
	if code, _ := health(t, base); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz %d with less room than the probe needs, want still degraded", code)
	}

	// Room again: the probe ends it.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitForWithin(t, "/healthz ok", 30*time.Second, func() bool { code, _ := health(t, base); return code == http.StatusOK })
	waitForWithin(t, "the admin told the disk is ok", 30*time.Second, func() bool { return countWith(tgAdminDMs(fake), "disk ok again: ") == 1 })
	last := fake.Post(tgGroup.ID, tgMario.ID, "@mother_bot still there?")
	waitForWithin(t, "an answer after the disk is ok", 30*time.Second, func() bool { return len(tgAnswers(fake, last)) == 1 })
	time.Sleep(time.Second) // a repeated answer or message would come now
	if got := tgAnswers(fake, spawn); len(got) != 1 {
		t.Errorf("the held message was answered %d times: %q", len(got), got)
	}
	if got := tgAnswers(fake, next); len(got) != 1 {
		t.Errorf("the message after it was answered %d times: %q", len(got), got)
	}
	dms := tgAdminDMs(fake)
	if len(dms) != 2 || countWith(dms, "disk full: ") != 1 || countWith(dms, "disk ok again: ") != 1 {
		t.Errorf("the admin got %q; want one \"disk full\" and one \"disk ok again\"", dms)
	}
	counts := map[string]int{}
	for _, m := range readChannelLog(t, data, "telegram", tgGroupID) {
		counts[m.Text]++
	}
	for _, text := range []string{spawnText, "@mother_bot hello again"} {
		if counts[text] != 1 {
			t.Errorf("log.jsonl holds %q %d times, want once", text, counts[text])
		}
	}
	select {
	case err := <-d.done:
		t.Fatalf("mother exited: %v", err)
	default:
	}
	log := d.stderr.String()
	if n := strings.Count(log, `msg="disk full: `); n != 1 {
		t.Errorf("the log says \"disk full: \" %d times, want once", n)
	}
	if !strings.Contains(log, `msg="disk ok again: `) {
		t.Errorf("the log does not say the disk is ok again")
	}
}

// TestDiskFailing: the real mother on internal/powercut, which fails
// writes and fsyncs with EIO. First every write and fsync fails: the
// message is not stored, not answered, not acknowledged to Telegram, the
// admin is told once ("disk error: ..."), /healthz is degraded; once the
// faults are cleared the probe ends it, the message is answered once and
// the admin told it is over. Then a single fsync of log.jsonl fails
// (fsyncgate: Mother gives that descriptor up, cuts the file back and
// opens it again): the message is not acknowledged, and is taken and
// answered once afterwards. log.jsonl holds each message once, every line
// whole. She never exits.
func TestDiskFailing(t *testing.T) {
	t.Parallel()
	pc := powercut.MountT(t, "", powercut.Options{})
	data := pc.Mountpoint()
	model := diskModel()
	defer model.Close()
	fake := newTelegramFake(t)
	listen := freePort(t)
	cfg := telegramConfig(fake, model)
	cfg["metrics"] = map[string]any{"listen": listen}
	d := startDaemon(t, data, cfg)
	base := "http://" + listen
	waitFor(t, "mother to connect", tgPolling(fake, 1))
	first := fake.Post(tgGroup.ID, tgMario.ID, "@mother_bot hello")
	waitFor(t, "the first answer", func() bool { return len(tgAnswers(fake, first)) == 1 })

	// Every write and fsync fails.
	pc.Inject(powercut.Fault{Write: true, Sync: true})
	failID := fake.NextUpdateID()
	failed := fake.Post(tgGroup.ID, tgMario.ID, "@mother_bot hello through EIO")
	waitForWithin(t, "the admin told the disk fails", 30*time.Second, func() bool { return countWith(tgAdminDMs(fake), "disk error: ") == 1 })
	waitForWithin(t, "/healthz degraded", 15*time.Second, func() bool {
		code, h := health(t, base)
		return code == http.StatusServiceUnavailable && strings.HasPrefix(h.Disk, "disk error: ")
	})
	time.Sleep(3 * time.Second) // an answer or an acknowledgement would come now
	if got := tgAnswers(fake, failed); len(got) != 0 {
		t.Fatalf("answered while every write fails: %q", got)
	}
	if c := fake.Confirmed(); c >= failID {
		t.Fatalf("Telegram holds update %d as handled (confirmed %d) though Mother could not store it", failID, c)
	}
	pc.ClearFaults()
	waitForWithin(t, "/healthz ok", 30*time.Second, func() bool { code, _ := health(t, base); return code == http.StatusOK })
	waitForWithin(t, "the held message answered", time.Minute, func() bool { return len(tgAnswers(fake, failed)) == 1 })
	waitForWithin(t, "the admin told the disk is ok", 30*time.Second, func() bool { return countWith(tgAdminDMs(fake), "disk ok again: ") == 1 })

	// One failed fsync of the group's log: a new episode.
	pc.Inject(powercut.Fault{Sync: true, Path: regexp.MustCompile(`channels/telegram/` + tgGroupID + `/log\.jsonl$`), Times: 1})
	once := fake.Post(tgGroup.ID, tgMario.ID, "@mother_bot hello once")
	waitForWithin(t, "the admin told the disk fails again", 30*time.Second, func() bool { return countWith(tgAdminDMs(fake), "disk error: ") == 2 })
	waitForWithin(t, "the message after a failed fsync answered", time.Minute, func() bool { return len(tgAnswers(fake, once)) == 1 })
	waitForWithin(t, "the admin told the disk is ok again", 30*time.Second, func() bool { return countWith(tgAdminDMs(fake), "disk ok again: ") == 2 })
	time.Sleep(time.Second) // a repeated answer would come now
	for _, trig := range []int{failed, once} {
		if got := tgAnswers(fake, trig); len(got) != 1 {
			t.Errorf("message %d answered %d times: %q", trig, len(got), got)
		}
	}
	if dms := tgAdminDMs(fake); len(dms) != 4 {
		t.Errorf("the admin got %q; want two episodes, each told once when it began and once when it ended", dms)
	}
	b, err := os.ReadFile(filepath.Join(data, "workspace/channels/telegram", tgGroupID, "log.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var m struct{ Text string }
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log.jsonl has a line that does not parse: %q", line)
		}
		counts[m.Text]++
	}
	for _, text := range []string{"@mother_bot hello through EIO", "@mother_bot hello once"} {
		if counts[text] != 1 {
			t.Errorf("log.jsonl holds %q %d times, want once", text, counts[text])
		}
	}
	select {
	case err := <-d.done:
		t.Fatalf("mother exited: %v", err)
	default:
	}
}

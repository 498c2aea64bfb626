package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/hatchery/kubernetes/kubetest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// kubeChicks is a Mother data dir whose chicks run on the real test
// cluster (a host of kind kubernetes in its own namespace), with the nest
// listening on the cluster bridge so Pods reach it.
type kubeChicks struct {
	k    *kubetest.Kube
	ns   string
	data string
}

// kubeChickData makes a data dir like chickData's, whose one host is the
// test cluster; hosts replaces chicks.hosts when given (the cluster entry
// is "cluster").
func kubeChickData(t *testing.T, hosts func(cluster map[string]any) []any) *kubeChicks {
	t.Helper()
	k := kubetest.Cluster(t)
	image := hatcherytest.BuildImage(t)
	kubeImportOnce(t, k, image)
	ns := k.Namespace(t, "mother-e2e")
	api := hatcherytest.Docker(t)
	data, _ := chickData(t, api, nil)
	cfgPath := filepath.Join(data, "config.json")
	var cfg map[string]any
	b, _ := os.ReadFile(cfgPath)
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cluster := map[string]any{
		"name": "cluster", "kind": "kubernetes", "kubeconfig": k.Kubeconfig, "namespace": ns,
		"imagePullPolicy": "Never", "capacity": 4, "workspaceSize": "128m",
	}
	list := []any{cluster}
	if hosts != nil {
		list = hosts(cluster)
	}
	cfg["chicks"].(map[string]any)["hosts"] = list
	// A chick in a Pod shares the 2 cores with the cluster, at
	// chickData's heartbeat (500 ms): a pause of the loaded machine is not
	// taken for a hang, since the watchdog counts no heartbeat missed in
	// a check of its own that came late, follows the gaps it measures
	// between the chick's messages, and gives a silence in the chick's
	// first intervals, before any is measured, four intervals each.
	// The nest listens on the cluster's bridge: where Pods reach this
	// machine.
	cfg["grpc"] = map[string]any{"listen": net.JoinHostPort(k.GatewayIP, "0")}
	b, _ = json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runMother(t, "", nil, "--check-config", data); r.code != 0 {
		t.Fatalf("--check-config: %s%s", r.stdout, r.stderr)
	}
	return &kubeChicks{k: k, ns: ns, data: data}
}

var (
	kubeImportMu sync.Mutex
	kubeImported = map[string]bool{}
)

func kubeImportOnce(t *testing.T, k *kubetest.Kube, image string) {
	t.Helper()
	kubeImportMu.Lock()
	defer kubeImportMu.Unlock()
	if !kubeImported[image] {
		k.ImportImage(t, image)
		kubeImported[image] = true
	}
}

// leftovers lists the chick Pods and Secrets in the test's namespace.
func (kc *kubeChicks) leftovers(t *testing.T) []string {
	t.Helper()
	c := kc.k.Client(t)
	var out []string
	pods, err := c.CoreV1().Pods(kc.ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		out = append(out, "pod/"+p.Name)
	}
	secrets, err := c.CoreV1().Secrets(kc.ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		out = append(out, "secret/"+s.Name)
	}
	return out
}

// noLeftovers waits (a Pod is deleted by its kubelet's confirmation)
// until the namespace holds no chick Pod and no Secret.
func (kc *kubeChicks) noLeftovers(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		left := kc.leftovers(t)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("left in namespace %s: %v", kc.ns, left)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestKubernetesChickWholePath: the real mother with a Kubernetes host: a
// message asks for work, Mother's model spawns a chick, its Pod runs from
// the imported offline image, its model calls go through the broker, bash
// runs in the Pod (as 65534, reaching Mother directly, its token not in
// the tools' environment) on the channel's files it fetched from the nest,
// the result reaches stdout, its attachment and outputs come back into the
// channel's directory, and nothing of the chick is left in the cluster.
func TestKubernetesChickWholePath(t *testing.T) {
	t.Parallel()
	kc := kubeChickData(t, nil)
	// Files in: the channel's memory and an attachment, fetched by the
	// chick from the nest at Join.
	channel := filepath.Join(kc.data, "workspace/channels/cli/local")
	for name, text := range map[string]string{"MEMORY.md": "The magic word is octopus.\n", "attachments/input.txt": "input-7\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(channel, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(channel, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		switch r.Model {
		case motherModel:
			if !hasToolResult(r) {
				return motherTurn("Compute 6*7 in the shell and report who ran it.")
			}
			return ollamatest.Turn{Text: "A chick is on it."}
		case chickModel:
			res := toolResults(r)
			switch len(res) {
			case 0:
				return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "bash", Args: map[string]any{"label": "compute",
					"command": "cat MEMORY.md attachments/input.txt; mkdir -p outputs && echo 42 > outputs/answer.txt && echo plot > scratch/plot.txt && " +
						"echo result=$((6*7)) uid=$(id -u); env; ls /var/run/secrets/kubernetes.io 2>&1"}}}}
			case 1:
				// Files out: an attachment, and outputs/ at the end.
				return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "attach", Args: map[string]any{"label": "share", "path": "scratch/plot.txt", "title": "the plot"}}}}
			}
			return ollamatest.Turn{Text: "Chick says: " + strings.Join(strings.Fields(res[0]), " ")}
		}
		return ollamatest.Turn{Status: 404, Error: "unknown model " + r.Model}
	})
	defer fake.Close()

	p := startChickMother(t, kc.data, chickEnv(fake))
	io.WriteString(p.stdin, "please run the heavy computation\n")
	p.waitOut(t, "Chick says:", 3*time.Minute)
	waitUntil(t, "the chick's result in log.jsonl", func() bool {
		b, _ := os.ReadFile(filepath.Join(channel, "log.jsonl"))
		return strings.Contains(string(b), "Files: `scratch/chicks/c-")
	})
	p.stdin.Close()
	if code := p.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, p.out(), p.errs())
	}
	out := p.out()
	for _, want := range []string{"A chick is on it.", "The magic word is octopus. input-7", "result=42 uid=65534",
		"MOTHER_ADDR=" + kc.k.GatewayIP + ":", "No such file or directory", "[attached the plot: ", "Files: `scratch/chicks/c-"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s\nstderr:\n%s", want, out, p.errs())
		}
	}
	for _, secret := range []string{secretKey, secretBot, "MOTHER_TOKEN="} {
		if strings.Contains(out, secret) {
			t.Errorf("%s reached the chick's tools: %s", secret, out)
		}
	}
	// The attached and output files came back from the Pod into the
	// channel's directory.
	for f, want := range map[string]string{"scratch/plot.txt": "plot\n", "outputs/answer.txt": "42\n"} {
		got, _ := filepath.Glob(filepath.Join(channel, "scratch/chicks/c-*", f))
		if len(got) != 1 {
			t.Errorf("%s not stored in the channel's directory", f)
			continue
		}
		if b, _ := os.ReadFile(got[0]); string(b) != want {
			t.Errorf("%s = %q, want %q", got[0], b, want)
		}
	}
	if !strings.Contains(p.errs(), "cannot verify that the cluster's network plugin enforces it") {
		t.Errorf("no warning that the NetworkPolicy's enforcement is not verified:\n%s", p.errs())
	}
	kc.noLeftovers(t)
}

// TestKubernetesMomctl: a chick Pod at work is listed by momctl chicks ls
// on its host, its log read by momctl chicks logs, the cluster shown by
// momctl status, and momctl chicks kill ends it, leaving no Pod and no
// Secret.
func TestKubernetesMomctl(t *testing.T) {
	t.Parallel()
	kc := kubeChickData(t, nil)
	p, c := kc.workingChick(t, "Think for a very long time.", "think hard")
	if ls := chicksLs(t, kc.data, false); len(ls) != 1 || ls[0].Host != "cluster" {
		t.Errorf("momctl chicks ls = %+v, want the chick on host cluster", ls)
	}
	// The kubelet writes a container's output to its log file on its own
	// schedule: the line may reach the file a moment after the chick's
	// model call.
	var logs string
	var code int
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		logs, code = momctl(t, kc.data, "chicks", "logs", c.ID)
		if (code == 0 && strings.Contains(logs, "joined")) || time.Now().After(deadline) {
			break
		}
	}
	if code != 0 || !strings.Contains(logs, "joined") {
		t.Errorf("momctl chicks logs (exit %d): %q, want the chick's own log", code, logs)
	}
	st, code := momctl(t, kc.data, "status")
	if re := `(?m)^  cluster\s+up for \S+\s+1/4 chicks\s+all tiers\s+Kubernetes ` + regexp.QuoteMeta(kubetest.Version); code != 0 || !regexp.MustCompile(re).MatchString(st) {
		t.Errorf("momctl status (exit %d) does not match %s:\n%s", code, re, st)
	}
	if left := kc.leftovers(t); len(left) != 2 {
		t.Errorf("while the chick runs the namespace holds %v, want its pod and its secret", left)
	}
	out, code := momctl(t, kc.data, "chicks", "kill", c.ID)
	if code != 0 || !strings.Contains(out, c.ID+" killed") {
		t.Errorf("momctl chicks kill: exit %d: %s", code, out)
	}
	p.waitOut(t, "killed by the operator", time.Minute)
	kc.noLeftovers(t)
	p.stdin.Close()
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, p.errs())
	}
}

// TestKubernetesAndDockerHosts: one Docker host (tier local) and the
// cluster (tier big) in one configuration: each tier's chicks run where
// it is served.
func TestKubernetesAndDockerHosts(t *testing.T) {
	t.Parallel()
	kc := kubeChickData(t, func(cluster map[string]any) []any {
		cluster["tiers"] = []string{"big"}
		return []any{
			map[string]any{"name": "box", "address": "unix:///var/run/docker.sock", "tiers": []string{"local"}},
			cluster,
		}
	})
	cfgPath := filepath.Join(kc.data, "config.json")
	var cfg map[string]any
	b, _ := os.ReadFile(cfgPath)
	json.Unmarshal(b, &cfg)
	chicks := cfg["chicks"].(map[string]any)
	chicks["tiers"] = map[string]any{
		"local": map[string]any{"provider": "ollama", "model": chickModel, "description": "small"},
		"big":   map[string]any{"provider": "ollama", "model": "chick-big", "description": "large"},
	}
	chicks["maxPerChannel"] = 10
	b, _ = json.MarshalIndent(cfg, "", "  ")
	os.WriteFile(cfgPath, b, 0o600)

	release := make(chan struct{})
	called := make(chan string, 8)
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		switch r.Model {
		case motherModel:
			if lastIsTool(r) {
				return ollamatest.Turn{Text: "Hatched."}
			}
			spawn := func(tier string) ollamatest.Call {
				return ollamatest.Call{Name: "spawn_chick", Args: map[string]any{"label": "delegating", "goal": "Work on tier " + tier + ".", "tier": tier}}
			}
			return ollamatest.Turn{Calls: []ollamatest.Call{spawn("local"), spawn("big")}}
		case chickModel, "chick-big":
			called <- r.Model
			select {
			case <-release:
			case <-time.After(3 * time.Minute):
			}
			return ollamatest.Turn{Text: "Chick finished."}
		}
		return ollamatest.Turn{Status: 404, Error: "unknown model " + r.Model}
	})
	defer fake.Close()
	var once sync.Once
	defer once.Do(func() { close(release) })

	p := startChickMother(t, kc.data, chickEnv(fake))
	io.WriteString(p.stdin, "spawn two chicks\n")
	for range 2 {
		select {
		case <-called:
		case <-time.After(3 * time.Minute):
			t.Fatalf("two chicks never called their models; stderr:\n%s", p.errs())
		}
	}
	byTier := map[string]string{}
	for _, c := range chicksLs(t, kc.data, false) {
		byTier[c.Tier] = c.Host
	}
	if byTier["local"] != "box" || byTier["big"] != "cluster" {
		t.Errorf("placement %v, want local on box, big on cluster", byTier)
	}
	once.Do(func() { close(release) })
	deadline := time.Now().Add(2 * time.Minute)
	for strings.Count(p.out(), "Chick finished.") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("chick results missing; stdout:\n%s\nstderr:\n%s", p.out(), p.errs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.stdin.Close()
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, p.errs())
	}
	kc.noLeftovers(t)
	if left := instanceContainers(t, hatcherytest.Docker(t), kc.data); len(left) != 0 {
		t.Errorf("%d chick containers left on the Docker host", len(left))
	}
}

// TestKubernetesChickSurvivesMotherSIGKILL: Mother is killed while her
// chick's Pod runs; the Pod goes on, the next Mother (same data, same nest
// address) takes it over, the chick reconnects, finishes and is answered,
// and nothing is left in the cluster.
func TestKubernetesChickSurvivesMotherSIGKILL(t *testing.T) {
	t.Parallel()
	kc := kubeChickData(t, nil)
	// A fixed nest port, so the Pod's MOTHER_ADDR still names the next
	// Mother.
	ln, err := net.Listen("tcp", net.JoinHostPort(kc.k.GatewayIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	kc.patchConfig(t, func(cfg map[string]any) { cfg["grpc"] = map[string]any{"listen": addr} })

	var mu sync.Mutex
	chickCalls := 0
	first := make(chan struct{})
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if r.Model == motherModel {
			if !hasToolResult(r) {
				return motherTurn("Survive a restart.")
			}
			return ollamatest.Turn{Text: "On it."}
		}
		mu.Lock()
		chickCalls++
		n := chickCalls
		mu.Unlock()
		if n == 1 {
			close(first)
			// Hangs until the caller goes away (Mother is killed).
			return ollamatest.Turn{Text: "lost", Delay: 5 * time.Minute}
		}
		return ollamatest.Turn{Text: "Finished after the restart."}
	})
	defer fake.Close()

	a := startChickMother(t, kc.data, chickEnv(fake))
	io.WriteString(a.stdin, "work through a restart\n")
	select {
	case <-first:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the chick never called its model; stderr:\n%s", a.errs())
	}
	c := waitRunningOr(t, kc.data, 30*time.Second, func() string { return "stderr:\n" + a.errs() })
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.wait(t, 10*time.Second)
	if left := kc.leftovers(t); len(left) != 2 {
		t.Fatalf("after Mother died the namespace holds %v, want the chick's pod and secret", left)
	}

	b2 := startChickMother(t, kc.data, chickEnv(fake))
	b2.stdin.Close() // nothing to say: finish the chick in flight and exit
	if code := b2.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("second Mother exit %d\nstdout:\n%s\nstderr:\n%s", code, b2.out(), b2.errs())
	}
	out := b2.out()
	for _, want := range []string{"chick " + c.ID + " is still working", "Finished after the restart."} {
		if !strings.Contains(out, want) {
			t.Errorf("second Mother's stdout lacks %q:\n%s\nstderr:\n%s", want, out, b2.errs())
		}
	}
	kc.noLeftovers(t)
}

// patchConfig changes the data dir's config.json with change.
func (kc *kubeChicks) patchConfig(t *testing.T, change func(cfg map[string]any)) {
	t.Helper()
	cfgPath := filepath.Join(kc.data, "config.json")
	var cfg map[string]any
	b, _ := os.ReadFile(cfgPath)
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	change(cfg)
	b, _ = json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestKubernetesChickBudgetExhausted: on the cluster as on Docker, the
// broker refuses the call past the chick's token budget; the chick ends
// with a clear message and its usage, and its Pod and Secret go.
func TestKubernetesChickBudgetExhausted(t *testing.T) {
	t.Parallel()
	kc := kubeChickData(t, nil)
	kc.patchConfig(t, func(cfg map[string]any) { cfg["budgets"] = map[string]any{"chickTokens": 200000} })
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if r.Model == motherModel {
			if !hasToolResult(r) {
				return motherTurn("Spend a lot.")
			}
			return ollamatest.Turn{Text: "Spending."}
		}
		return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "bash", Args: map[string]any{"label": "more", "command": "true"}}}, PromptTokens: 199970, OutputTokens: 30}
	})
	defer fake.Close()
	p := startChickMother(t, kc.data, chickEnv(fake))
	io.WriteString(p.stdin, "spend\n")
	p.stdin.Close()
	if code := p.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, p.errs())
	}
	out := p.out()
	for _, want := range []string{"stopped because a budget ran out", "used 200000 of its 200000 tokens", "200000 tokens: 199970 in, 30 out"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s\nstderr:\n%s", want, out, p.errs())
		}
	}
	kc.noLeftovers(t)
}

// TestKubernetesHungChick: the chick process in its Pod is stopped
// (SIGSTOP, found through the cluster's containerd); Mother hears no
// heartbeat, tells the user it hung, and deletes its Pod and Secret.
func TestKubernetesHungChick(t *testing.T) {
	t.Parallel()
	kc := kubeChickData(t, nil)
	p, c := kc.workingChick(t, "Hang.", "hang")
	// The chick is working, so its container runs; the kubelet's status
	// update naming the container may come a moment after.
	var cid string
	waitForWithin(t, "the kubelet to name the chick's container", time.Minute, func() bool {
		pods, err := kc.k.Client(t).CoreV1().Pods(kc.ns).List(t.Context(), metav1.ListOptions{LabelSelector: "mother.chick.id=" + c.ID})
		if err != nil || len(pods.Items) != 1 {
			t.Fatalf("the chick's pod: %+v, %v", pods, err)
		}
		if st := pods.Items[0].Status.ContainerStatuses; len(st) == 1 {
			cid = strings.TrimPrefix(st[0].ContainerID, "containerd://")
		}
		return cid != ""
	})
	out, err := exec.Command("ctr", "-a", kc.k.ContainerdSocket, "-n", "k8s.io", "tasks", "ls").CombinedOutput()
	if err != nil {
		t.Fatalf("ctr tasks ls: %v\n%s", err, out)
	}
	pid := 0
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == cid {
			pid, _ = strconv.Atoi(f[1])
		}
	}
	if pid <= 0 {
		t.Fatalf("no task for container %s in:\n%s", cid, out)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	p.waitOut(t, "(no heartbeat for", time.Minute)
	kc.noLeftovers(t)
	p.stdin.Close()
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, p.errs())
	}
}

// TestKubernetesSpawnKillCycles: through the real mother, 50 chicks on the
// cluster, five at a time: her model spawns them, momctl kills them while
// they work, and afterwards the namespace holds no Pod and no Secret.
func TestKubernetesSpawnKillCycles(t *testing.T) {
	t.Parallel()
	const batch, rounds = 5, 10
	kc := kubeChickData(t, func(cluster map[string]any) []any {
		cluster["capacity"] = batch
		return []any{cluster}
	})
	kc.patchConfig(t, func(cfg map[string]any) {
		ch := cfg["chicks"].(map[string]any)
		ch["maxPerChannel"], ch["maxPerUser"] = batch, batch
	})
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if r.Model == motherModel {
			// A round's message asks for the spawns; the spawns' results
			// (the request's last message) get the answer; a chick's
			// end (its report) gets a word.
			last := r.Messages[len(r.Messages)-1]
			if last.Role == "tool" || !regexp.MustCompile(`round \d+$`).MatchString(r.LastUser()) {
				return ollamatest.Turn{Text: "Noted."}
			}
			var calls []ollamatest.Call
			for i := range batch {
				calls = append(calls, ollamatest.Call{Name: "spawn_chick", Args: map[string]any{"label": "delegating", "goal": fmt.Sprintf("%s, part %d", r.LastUser(), i)}})
			}
			return ollamatest.Turn{Calls: calls}
		}
		return ollamatest.Turn{Text: "never", Delay: 5 * time.Minute} // works until killed
	})
	defer fake.Close()
	p := startChickMother(t, kc.data, chickEnv(fake))
	// list is momctl chicks ls; ok is false while Mother is not answering
	// yet (she may still be starting when the first round is sent).
	list := func() (l []lsChick, ok bool) {
		out, code := momctl(t, kc.data, "chicks", "ls", "--json")
		if code != 0 || json.Unmarshal([]byte(out), &l) != nil {
			return nil, false
		}
		return l, true
	}
	for r := range rounds {
		io.WriteString(p.stdin, fmt.Sprintf("round %d\n", r))
		var l []lsChick
		for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
			l, _ = list()
			running := 0
			for _, c := range l {
				if c.State == "running" {
					running++
				}
			}
			if running == batch {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d of %d chicks running: %+v\n%s", r, running, batch, l, p.errs())
			}
		}
		for _, c := range l {
			if out, code := momctl(t, kc.data, "chicks", "kill", c.ID); code != 0 {
				t.Fatalf("round %d: momctl chicks kill %s: exit %d: %s", r, c.ID, code, out)
			}
		}
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
			left, ok := list()
			if ok && len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: chicks still alive after the kills: %+v (momctl answered: %v)", r, left, ok)
			}
		}
	}
	kc.noLeftovers(t)
	p.stdin.Close()
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, p.errs())
	}
}

// workingChick starts Mother, has her model give a chick goal for the
// message say, and returns once that chick runs and waits on its own
// model call (which never answers).
func (kc *kubeChicks) workingChick(t *testing.T, goal, say string) (*chickProc, lsChick) {
	t.Helper()
	calling := make(chan struct{}, 10)
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if r.Model == motherModel {
			if !hasToolResult(r) {
				return motherTurn(goal)
			}
			return ollamatest.Turn{Text: "Started."}
		}
		calling <- struct{}{}
		return ollamatest.Turn{Text: "never", Delay: 5 * time.Minute}
	})
	t.Cleanup(fake.Close)
	p := startChickMother(t, kc.data, chickEnv(fake))
	io.WriteString(p.stdin, say+"\n")
	select {
	case <-calling:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the chick never called its model; stderr:\n%s", p.errs())
	}
	return p, waitRunning(t, kc.data, 30*time.Second)
}

package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
)

// outside is what an isolated chick must not reach, all of it made by the
// test on this machine: a listener on the Docker host's loopback, a
// listener on the host's address on a bridge network of the test's own, a
// neighbouring container on that network, and a DNS server there that
// knows the name "outside.test". Every listener answers "HELLO".
type outside struct {
	api     *client.Client
	network string
	// Gateway is the host's address on the test network.
	Gateway string
	// Loopback and Bridge are the host's listeners.
	Loopback, Bridge string
	// Neighbour is the neighbouring container's listener; NeighbourIP its
	// address.
	Neighbour, NeighbourIP string
	// DNS is the test's DNS server (Gateway:53).
	DNS string
	// Web is an HTTP server container on the network (port 8080) serving
	// /hello.txt ("HELLO-WEB"); WebIP its address.
	Web, WebIP string
}

// outsideName is the name the test's DNS server answers, with TEST-NET-1's
// 192.0.2.1 (never contacted).
const outsideName = "outside.test"

// makeOutside builds the outside world of an isolation test and removes it
// at cleanup.
func makeOutside(t *testing.T, api *client.Client) *outside {
	t.Helper()
	ctx := context.Background()
	o := &outside{api: api, network: fmt.Sprintf("mother-test-outside-%d", time.Now().UnixNano())}
	if _, err := api.NetworkCreate(ctx, o.network, network.CreateOptions{Driver: "bridge", Labels: map[string]string{"mother.test": "outside"}}); err != nil {
		t.Fatalf("create the test network: %v", err)
	}
	t.Cleanup(func() { api.NetworkRemove(context.Background(), o.network) })
	ni, err := api.NetworkInspect(ctx, o.network, network.InspectOptions{})
	if err != nil || len(ni.IPAM.Config) == 0 || ni.IPAM.Config[0].Gateway == "" {
		t.Fatalf("the test network has no gateway: %v %+v", err, ni.IPAM)
	}
	o.Gateway = ni.IPAM.Config[0].Gateway
	o.Loopback = hello(t, "127.0.0.1:0")
	o.Bridge = hello(t, net.JoinHostPort(o.Gateway, "0"))
	o.DNS = dnsServer(t, net.JoinHostPort(o.Gateway, "53"), outsideName, "192.0.2.1")
	o.NeighbourIP = o.run(t, "neighbour", `while true; do echo HELLO | nc -l -p 8080; done`)
	o.Neighbour = net.JoinHostPort(o.NeighbourIP, "8080")
	o.WebIP = o.run(t, "web", `mkdir -p /tmp/www && echo HELLO-WEB > /tmp/www/hello.txt && exec httpd -f -p 8080 -h /tmp/www`)
	o.Web = net.JoinHostPort(o.WebIP, "8080")
	return o
}

// run starts a busybox shell script in a container on the test network and
// returns its address there.
func (o *outside) run(t *testing.T, name, script string) string {
	t.Helper()
	ctx := context.Background()
	cfg := &container.Config{Image: hatcherytest.BuildImage(t), Entrypoint: []string{"/bin/sh", "-c", script}, Labels: map[string]string{"mother.test": "outside"}}
	host := &container.HostConfig{NetworkMode: container.NetworkMode(o.network), AutoRemove: false}
	c, err := o.api.ContainerCreate(ctx, cfg, host, nil, nil, o.network+"-"+name)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	t.Cleanup(func() {
		o.api.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
	})
	if err := o.api.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	ci, err := o.api.ContainerInspect(ctx, c.ID)
	if err != nil || ci.NetworkSettings == nil || ci.NetworkSettings.Networks[o.network] == nil {
		t.Fatalf("inspect %s: %v", name, err)
	}
	ip := ci.NetworkSettings.Networks[o.network].IPAddress
	// Wait until it listens: a connection from the host that gets an answer.
	deadline := time.Now().Add(20 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip, "8080"), time.Second)
		if err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never listened on %s:8080: %v", name, ip, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return ip
}

// hello listens on addr and greets every connection with "HELLO".
func hello(t *testing.T, addr string) string {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "HELLO\n")
			c.Close()
		}
	}()
	return l.Addr().String()
}

// dnsServer answers A queries for name with addr on UDP addr, and
// NXDOMAIN for anything else: just enough DNS for nslookup.
func dnsServer(t *testing.T, listen, name, answer string) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", listen)
	if err != nil {
		t.Fatalf("dns listen %s: %v", listen, err)
	}
	t.Cleanup(func() { pc.Close() })
	ip := net.ParseIP(answer).To4()
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp := dnsAnswer(buf[:n], name, ip); resp != nil {
				pc.WriteTo(resp, from)
			}
		}
	}()
	return pc.LocalAddr().String()
}

// dnsAnswer builds the reply to one query (nil: not a query to answer).
func dnsAnswer(q []byte, name string, ip net.IP) []byte {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:6]) != 1 {
		return nil
	}
	// The question: labels up to a zero byte, then type and class.
	i := 12
	var labels []string
	for i < len(q) && q[i] != 0 {
		l := int(q[i])
		if i+1+l > len(q) {
			return nil
		}
		labels = append(labels, string(q[i+1:i+1+l]))
		i += 1 + l
	}
	if i+5 > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[i+1 : i+3])
	question := q[12 : i+5]
	var r bytes.Buffer
	r.Write(q[0:2])
	found := strings.EqualFold(strings.Join(labels, "."), name)
	flags := uint16(0x8180) // response, recursion desired and available
	if !found {
		flags |= 3 // NXDOMAIN
	}
	answers := uint16(0)
	if found && qtype == 1 {
		answers = 1
	}
	binary.Write(&r, binary.BigEndian, []uint16{flags, 1, answers, 0, 0})
	r.Write(question)
	if answers == 1 {
		r.Write([]byte{0xc0, 12})                                    // the question's name
		binary.Write(&r, binary.BigEndian, []uint16{1, 1, 0, 60, 4}) // A, IN, TTL 60, 4 bytes
		r.Write(ip)
	}
	return r.Bytes()
}

// probeScript tries, from wherever it runs, every way out that an
// isolated chick must not have, and prints "PROBE <name> ok|fail" for each,
// then the network interfaces it sees and its count of IPv6 addresses. It
// asks no resolver but the test's own (the machine's resolver is on the
// LAN, where tests send nothing).
// nest is Mother's nest listener (on the host's loopback).
func (o *outside) probeScript(nest string) string {
	probe := func(name, addr string) string {
		h, p, _ := net.SplitHostPort(addr)
		return fmt.Sprintf("if nc -w 3 %s %s </dev/null 2>/dev/null | grep -q HELLO; then echo 'PROBE %s ok'; else echo 'PROBE %s fail'; fi\n", h, p, name, name)
	}
	nh, np, _ := net.SplitHostPort(nest)
	dh, _, _ := net.SplitHostPort(o.DNS)
	return probe("host-loopback", o.Loopback) +
		probe("host-bridge", o.Bridge) +
		probe("neighbour", o.Neighbour) +
		fmt.Sprintf("if nc -w 3 %s %s </dev/null >/dev/null 2>&1; then echo 'PROBE mother-nest ok'; else echo 'PROBE mother-nest fail'; fi\n", nh, np) +
		fmt.Sprintf("if nslookup %s %s 2>/dev/null | grep -q 192.0.2.1; then echo 'PROBE dns ok'; else echo 'PROBE dns fail'; fi\n", outsideName, dh) +
		"echo \"INTERFACES $(ls /sys/class/net | tr '\\n' ' ')\"\n" +
		"echo \"INET6 $(cat /proc/net/if_inet6 2>/dev/null | wc -l)\"\n" +
		// The chick's own loopback by name, and where its /etc/hosts comes
		// from (mountinfo: the mount's root in its filesystem, and the type).
		"(echo HELLO | nc -l -p 4321 127.0.0.1 &); sleep 0.3; echo \"LOCALHOST $(nc -w 2 localhost 4321 </dev/null)\"\n" +
		"echo \"HOSTSFROM $(awk '$5 == \"/etc/hosts\" { for (i = 6; $i != \"-\"; i++); print $4, $(i+1) }' /proc/self/mountinfo)\"\n"
}

// probes reads the script's "PROBE name ok|fail" lines.
func probes(out string) map[string]bool {
	m := map[string]bool{}
	for _, f := range regexp.MustCompile(`PROBE (\S+) (ok|fail)\b`).FindAllStringSubmatch(out, -1) {
		m[f[1]] = f[2] == "ok"
	}
	return m
}

// onHostNetwork runs script in a container on the host's network (the
// positive control: from there every probe must succeed) and returns its
// output.
func (o *outside) onHostNetwork(t *testing.T, script string) string {
	t.Helper()
	ctx := context.Background()
	cfg := &container.Config{Image: hatcherytest.BuildImage(t), Entrypoint: []string{"/bin/sh", "-c", script}, Labels: map[string]string{"mother.test": "outside"}}
	c, err := o.api.ContainerCreate(ctx, cfg, &container.HostConfig{NetworkMode: "host"}, nil, nil, "")
	if err != nil {
		t.Fatalf("create the control container: %v", err)
	}
	defer o.api.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
	wait, errc := o.api.ContainerWait(ctx, c.ID, container.WaitConditionNextExit)
	if err := o.api.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		t.Fatalf("start the control container: %v", err)
	}
	select {
	case <-wait:
	case err := <-errc:
		t.Fatalf("wait for the control container: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the control container did not end within a minute")
	}
	logs, err := o.api.ContainerLogs(ctx, c.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	var out bytes.Buffer
	stdcopy.StdCopy(&out, &out, logs)
	return out.String()
}

// TestOutsideProbesWork is the probes' positive control on its own: run
// from a container on the host's network, every probe reaches what it
// aims at, so a probe that fails from inside a chick fails because of the
// chick's isolation, not because the probe is broken.
func TestOutsideProbesWork(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	o := makeOutside(t, api)
	nest := hello(t, "127.0.0.1:0")
	out := o.onHostNetwork(t, o.probeScript(nest))
	got := probes(out)
	for _, name := range []string{"host-loopback", "host-bridge", "neighbour", "mother-nest", "dns"} {
		if !got[name] {
			t.Errorf("probe %s failed from the host's network: the probe itself is broken\n%s", name, out)
		}
	}
}

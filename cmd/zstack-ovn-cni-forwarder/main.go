// Command zstack-ovn-cni is the CNI executable a container runtime runs. It is a relay with no CNI logic:
// it sends the CNI_* environment and stdin to the node agent's socket in the agent's own protocol
// (POST /v1/cni, src/cni/protocol.ts), prints the agent's stdout and exits with the agent's code. Every
// CNI decision is the TypeScript agent's.
//
// Two cases have no agent to decide. VERSION is answered here from constants generated from the
// TypeScript source (constants.go). When the socket cannot be read from stdin or nothing listens on it,
// the invocation is handed, unchanged, to the TypeScript shim installed beside this file
// (zstack-ovn-cni-shim), which answers as the agent would have where it can (docs/cni.md). Node starts
// only on those error paths.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// maxReplyBytes bounds what is read from the agent; a reply is a CNI result of a few KiB.
const maxReplyBytes = 16 << 20

func main() {
	os.Exit(run())
}

func run() int {
	command := os.Getenv("CNI_COMMAND")
	if command == "" {
		// Not a runtime's call (perhaps a person at a terminal): the shim explains itself, reading stdin
		// only when it is not a terminal.
		return execShim(nil, "CNI_COMMAND is not set")
	}
	stdin, err := io.ReadAll(os.Stdin)
	if err != nil && !errors.Is(err, syscall.EBADF) {
		return fail(5, nil, "zstack-ovn-cni: reading stdin failed", err.Error())
	}
	if command == "VERSION" {
		return printVersion(stdin)
	}
	socket, ok := socketPath(stdin)
	if !ok {
		return handOver(stdin, "the network config on stdin names no usable socket")
	}
	conn, err := net.Dial("unix", socket)
	if err != nil {
		return handOver(stdin, fmt.Sprintf("cannot reach the zstack-ovn node agent at %s (%v)", socket, err))
	}
	defer conn.Close()
	return forward(conn, socket, stdin)
}

// socketPath is the config's "serverSocket" when it is an absolute path a unix socket address can hold,
// the default when the config has none, and false when stdin is not a JSON object or the field is unusable.
func socketPath(stdin []byte) (string, bool) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(stdin, &fields) != nil || fields == nil {
		return "", false
	}
	raw, present := fields["serverSocket"]
	if !present {
		return defaultServerSocket, true
	}
	var path string
	if json.Unmarshal(raw, &path) != nil || !strings.HasPrefix(path, "/") || len(path) > maxSocketPathBytes {
		return "", false
	}
	return path, true
}

type agentRequest struct {
	Env   map[string]string `json:"env"`
	Stdin string            `json:"stdin"`
}

type agentReply struct {
	ExitCode *int    `json:"exitCode"`
	Stdout   *string `json:"stdout"`
}

// cniEnv is the CNI_* subset of the environment: the runtime's other variables stay here.
func cniEnv() map[string]string {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "CNI_") {
			env[k] = v
		}
	}
	return env
}

func forward(conn net.Conn, socket string, stdin []byte) int {
	body, err := json.Marshal(agentRequest{Env: cniEnv(), Stdin: string(stdin)})
	if err != nil {
		return fail(5, stdin, "zstack-ovn-cni: encoding the request failed", err.Error())
	}
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"+
		"Content-Length: %d\r\nConnection: close\r\n\r\n", cniRequestPath, len(body))
	if _, err := conn.Write(append([]byte(head), body...)); err != nil {
		return lost(stdin, socket, err.Error())
	}
	status, text, err := readResponse(bufio.NewReader(io.LimitReader(conn, maxReplyBytes)))
	var bad *protocolError
	if errors.As(err, &bad) {
		// The peer answered, but not in the agent's protocol: trying again would not help.
		return fail(107, stdin, fmt.Sprintf("the peer at %s did not answer as the zstack-ovn node agent does (%s); "+
			"the shim and the agent may be of different releases", socket, bad.what), "")
	}
	if err != nil {
		return lost(stdin, socket, err.Error())
	}
	switch status {
	case 200:
	case 503:
		return lost(stdin, socket, "agent is shutting down: "+strings.TrimSpace(string(text)))
	default:
		return fail(107, stdin, fmt.Sprintf("the node agent at %s refused the request (HTTP %d for POST %s); "+
			"the shim and the agent may be of different releases", socket, status, cniRequestPath),
			truncate(strings.TrimSpace(string(text)), 500))
	}
	var reply agentReply
	if json.Unmarshal(text, &reply) != nil || reply.ExitCode == nil || *reply.ExitCode < 0 || *reply.ExitCode > 255 || reply.Stdout == nil {
		return fail(107, stdin, `reply body must be {"exitCode": N, "stdout": "..."}`, "")
	}
	os.Stdout.WriteString(*reply.Stdout)
	return *reply.ExitCode
}

// protocolError is a reply that arrived but is not an HTTP/1.x response the agent sends; any other error of
// readResponse is the connection ending early.
type protocolError struct{ what string }

func (e *protocolError) Error() string { return e.what }

func malformed(format string, args ...any) error { return &protocolError{fmt.Sprintf(format, args...)} }

// readResponse reads one HTTP/1.1 response: the status code and the body (Content-Length bytes, or up
// to the end of the connection when the header is absent; the request asked for Connection: close).
func readResponse(r *bufio.Reader) (int, []byte, error) {
	line, err := r.ReadString('\n')
	if err != nil && !strings.HasPrefix("HTTP/1.", line) && !strings.HasPrefix(line, "HTTP/1.") {
		return 0, nil, malformed("not an HTTP/1.x status line: %q", truncate(line, 100))
	}
	if err != nil {
		return 0, nil, fmt.Errorf("reading the status line: %w", err)
	}
	proto, rest, _ := strings.Cut(strings.TrimRight(line, "\r\n"), " ")
	codeText, _, _ := strings.Cut(rest, " ")
	status, err := strconv.Atoi(codeText)
	if !strings.HasPrefix(proto, "HTTP/1.") || err != nil || status < 100 || status > 999 {
		return 0, nil, malformed("not an HTTP/1.x status line: %q", truncate(line, 100))
	}
	length := -1
	for {
		h, err := r.ReadString('\n')
		if err != nil {
			return 0, nil, fmt.Errorf("reading the headers: %w", err)
		}
		h = strings.TrimRight(h, "\r\n")
		if h == "" {
			break
		}
		name, value, _ := strings.Cut(h, ":")
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "content-length":
			if length, err = strconv.Atoi(strings.TrimSpace(value)); err != nil || length < 0 || length > maxReplyBytes {
				return 0, nil, malformed("bad Content-Length %q", truncate(value, 40))
			}
		case "transfer-encoding":
			return 0, nil, malformed("unexpected Transfer-Encoding %q", truncate(value, 40))
		}
	}
	if length < 0 {
		body, err := io.ReadAll(r)
		return status, body, err
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, fmt.Errorf("reading %d body bytes: %w", length, err)
	}
	return status, body, nil
}

// lost reports that the agent went away before it answered: the runtime should try again (code 11).
func lost(stdin []byte, socket, cause string) int {
	return fail(11, stdin, fmt.Sprintf("the zstack-ovn node agent at %s closed the connection before answering (%s)",
		socket, cause), "socket "+socket+": connection lost")
}

// handOver runs the TypeScript shim with this environment and stdin, relaying its output and exit code.
func handOver(stdin []byte, why string) int {
	return execShim(stdin, why)
}

func execShim(stdin []byte, why string) int {
	shim, err := shimPath()
	if err == nil {
		_, err = os.Stat(shim)
	}
	if err != nil {
		return fail(5, stdin, "zstack-ovn-cni: "+why+", and the shim that answers without the agent is missing",
			err.Error())
	}
	if stdin == nil {
		// Nothing read yet: the shim takes over this process, stdin and all.
		err = syscall.Exec(shim, []string{shim}, os.Environ())
		return fail(5, nil, "zstack-ovn-cni: running "+shim+" failed", err.Error())
	}
	cmd := exec.Command(shim)
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() >= 0 {
		return exit.ExitCode()
	}
	if err != nil {
		return fail(5, stdin, "zstack-ovn-cni: running "+shim+" failed", err.Error())
	}
	return 0
}

// shimPath is the shim beside this executable: found through /proc/self/exe, or, where /proc is not mounted
// (a chroot), through the path the runtime ran us by (runtimes run plugins by their full path).
func shimPath() (string, error) {
	self, err := os.Executable()
	if err != nil {
		if !strings.Contains(os.Args[0], "/") {
			return "", err
		}
		self = os.Args[0]
	}
	return filepath.Join(filepath.Dir(self), shimName), nil
}

type cniError struct {
	CNIVersion string `json:"cniVersion"`
	Code       int    `json:"code"`
	Msg        string `json:"msg"`
	Details    string `json:"details,omitempty"`
}

// fail prints a CNI error in the request's version when it is one we speak, else the newest, and exits 1.
func fail(code int, stdin []byte, msg, details string) int {
	out, _ := json.Marshal(cniError{CNIVersion: replyVersion(stdin), Code: code, Msg: msg, Details: details})
	os.Stdout.Write(append(out, '\n'))
	return 1
}

func requestedVersion(stdin []byte) (string, bool) {
	var conf struct {
		CNIVersion *string `json:"cniVersion"`
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(stdin, &fields) != nil {
		return "", false
	}
	raw, ok := fields["cniVersion"]
	if !ok || json.Unmarshal(raw, &conf.CNIVersion) != nil || conf.CNIVersion == nil {
		return "", false
	}
	return *conf.CNIVersion, true
}

func replyVersion(stdin []byte) string {
	if v, ok := requestedVersion(stdin); ok {
		for _, s := range supportedVersions {
			if v == s {
				return v
			}
		}
	}
	return latestVersion
}

// printVersion answers VERSION as the agent's spec.ts versionReply does: the requested version echoed
// when it looks like one, and the versions we speak.
func printVersion(stdin []byte) int {
	v, ok := requestedVersion(stdin)
	if !ok || !isSemver(v) {
		v = latestVersion
	}
	out, _ := json.Marshal(struct {
		CNIVersion        string   `json:"cniVersion"`
		SupportedVersions []string `json:"supportedVersions"`
	}{v, supportedVersions})
	os.Stdout.Write(append(out, '\n'))
	return 0
}

// isSemver is /^\d+\.\d+\.\d+$/.
func isSemver(v string) bool {
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

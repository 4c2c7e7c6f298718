//go:build unix && !linux

package testservers

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcAttr puts the child in its own process group, so that kill reaches
// all its children.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

func killGroup(p *os.Process) error { return syscall.Kill(-p.Pid, syscall.SIGKILL) }

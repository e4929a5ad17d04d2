package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// TestLogToKeepsClientLogsOffTheReport: after logTo, controller-runtime's log (which
// otherwise prints "log.SetLogger(...) was never called" with a stack trace) and klog
// (where client-go reports client-side throttling) write to the side log, and nothing to
// the terminal the report goes to.
func TestLogToKeepsClientLogsOffTheReport(t *testing.T) {
	var side bytes.Buffer
	logTo(&side)
	defer klog.ClearLogger()

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	klog.Info("Waited for 5.2s due to client-side throttling, not priority and fairness")
	ctrllog.Log.WithName("cache").Info("Starting informer")
	klog.Flush()
	os.Stderr = stderr
	w.Close()
	terminal, _ := io.ReadAll(r)

	if len(terminal) > 0 {
		t.Errorf("written to the terminal:\n%s", terminal)
	}
	for _, want := range []string{"client-side throttling", "Starting informer"} {
		if !strings.Contains(side.String(), want) {
			t.Errorf("the side log lacks %q:\n%s", want, side.String())
		}
	}
}

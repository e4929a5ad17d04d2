package review

import (
	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// RequestLogger is the admission.Webhook LogConstructor NewWebhook sets: it names the same
// request as controller-runtime's default (object, namespace, name, resource, user,
// requestID), but adds those values when a message is logged rather than for every
// request. Most reviews log nothing, and building the values costs a dozen allocations.
func RequestLogger(base logr.Logger, req *admission.Request) logr.Logger {
	if req == nil || base.GetSink() == nil {
		return base
	}
	return logr.New(&requestSink{base: base, req: req})
}

// requestSink defers adding the request's values to the base logger until it logs.
type requestSink struct {
	base  logr.Logger
	req   *admission.Request
	depth int
}

var _ logr.CallDepthLogSink = &requestSink{}

// logger is the base logger with the request's values; frames is how many frames this
// sink adds between the caller and the logger: 1 when it logs through it, 0 when it hands
// the logger on.
func (s *requestSink) logger(frames int) logr.LogSink {
	r := s.req
	return s.base.WithCallDepth(s.depth+frames).WithValues("object", klog.KRef(r.Namespace, r.Name),
		"namespace", r.Namespace, "name", r.Name, "resource", r.Resource,
		"user", r.UserInfo.Username, "requestID", r.UID).GetSink()
}

func (s *requestSink) Init(logr.RuntimeInfo) {}

func (s *requestSink) Enabled(level int) bool { return s.base.GetSink().Enabled(level) }

func (s *requestSink) Info(level int, msg string, keysAndValues ...any) {
	s.logger(1).Info(level, msg, keysAndValues...)
}

func (s *requestSink) Error(err error, msg string, keysAndValues ...any) {
	s.logger(1).Error(err, msg, keysAndValues...)
}

func (s *requestSink) WithValues(keysAndValues ...any) logr.LogSink {
	return s.logger(0).WithValues(keysAndValues...)
}

func (s *requestSink) WithName(name string) logr.LogSink { return s.logger(0).WithName(name) }

func (s *requestSink) WithCallDepth(depth int) logr.LogSink {
	c := *s
	c.depth += depth
	return &c
}

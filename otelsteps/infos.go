package otelsteps

import (
	"bytes"
	"reflect"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/asyncsteps/asyncsteps"
)

// infoPolicy is how much of an error's info the spans export: none if
// omit, else at most max bytes of it, all of it if max is 0. The zero
// value exports the infos as they are.
type infoPolicy struct {
	omit bool
	max  int
}

func infoPolicyOf(c Config) infoPolicy {
	switch {
	case c.OmitInfo:
		return infoPolicy{omit: true}
	case c.MaxInfoBytes == 0:
		return infoPolicy{max: DefaultMaxInfoBytes}
	case c.MaxInfoBytes < 0:
		return infoPolicy{}
	}
	return infoPolicy{max: c.MaxInfoBytes}
}

// ellipsis ends an info that was cut.
const ellipsis = "…"

// cut returns info as valid UTF-8, each run of bad bytes made a U+FFFD
// (see validUTF8), and cut to at most p.max bytes if longer, at a
// character boundary, ended with the ellipsis (if p.max leaves it room),
// so that a reader knows there was more.
func (p infoPolicy) cut(info string) string {
	s, long := head(info, p.max)
	if !long {
		return s
	}
	return cutAt(s, p.max)
}

// head returns the part of s that a cap of max bytes (0: none) may keep,
// as valid UTF-8, and whether s says more than it keeps. The cap counts
// the bytes as exported, each run of bad bytes made a U+FFFD of 3 bytes
// (see validUTF8): a run may make s shorter or longer than it was. Only
// what may be kept is read, up to a byte or so over max, and the bad
// bytes of a run at the edge: an info or a stack may run to megabytes.
func head(s string, max int) (string, bool) {
	switch {
	case max == 0:
		return validUTF8(s), false
	case len(s) <= max && utf8.ValidString(s):
		return s, false
	case len(s) > max && utf8.ValidString(s[:max+1]):
		return s[:max+1], true
	}
	return exportedHead(s, max)
}

// exportedHead is head for a text with bad bytes within its first max+1
// bytes, or a stack: it makes the text as exported, character by
// character, until that is longer than max or s ends. Up to the first bad
// byte, that is s.
func exportedHead[T string | []byte](s T, max int) (string, bool) {
	var b []byte // the text as exported, once it differs from s
	n := 0       // its length
	inRun := false
	i := 0
	for ; i < len(s) && n <= max; i++ {
		// Converted, the 4 bytes at most of a []byte are not copied to
		// the heap.
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if r != utf8.RuneError || size > 1 {
			if b != nil {
				b = append(b, s[i:i+size]...)
			}
			n, inRun = n+size, false
			i += size - 1
			continue
		}
		if inRun {
			continue // one U+FFFD for the whole run
		}
		if b == nil {
			b = append(make([]byte, 0, max+utf8.UTFMax), s[:i]...)
		}
		b = append(b, string(utf8.RuneError)...)
		n, inRun = n+len(string(utf8.RuneError)), true
	}
	if b == nil {
		return string(s[:i]), n > max
	}
	return string(b), n > max
}

// cutAt returns s, valid UTF-8 that says more than max bytes keep, cut
// to at most max bytes at a character boundary and ended with the
// ellipsis when max leaves it room (over 3 bytes).
func cutAt(s string, max int) string {
	n, mark := max, ""
	if n > len(ellipsis) {
		n, mark = n-len(ellipsis), ellipsis
	}
	// s[n] is the first byte left out: back off the character it is in
	// the middle of, if any.
	for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + mark
}

// validUTF8 returns s with each run of bytes that are not UTF-8 made a
// U+FFFD, as OTLP requires of the strings it carries: its protobuf
// encoding refuses a string that is not, and with it the whole batch of
// spans it is in. An error's info or code is the application's text, and
// may hold any bytes (an upstream's, a file name).
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, string(utf8.RuneError))
}

// maxCodeBytes caps the codes the spans export, whatever caps the infos:
// a code is an identifier (FTN12's longest, NotSupportedVersion, takes
// 19 bytes), yet the application's text, which may be a peer's (a FutoIn
// service's error code, raised as it came) at any length; the SDK bounds
// neither a status description nor, unless told, an attribute.
const maxCodeBytes = 128

// exportedCode returns code as the spans export it: valid UTF-8, cut as
// an info is to maxCodeBytes.
func exportedCode(code string) string {
	return infoPolicy{max: maxCodeBytes}.cut(code)
}

// describe returns the status description of a span that fails with err:
// "code: info", with the info as p exports it, the code as exportedCode
// does.
func (p infoPolicy) describe(err *asyncsteps.Error) string {
	if p.omit || err.Info == "" {
		return exportedCode(err.Code)
	}
	return exportedCode(err.Code) + ": " + p.cut(err.Info)
}

// eventAttributes returns the attributes of err's step error event.
func (p infoPolicy) eventAttributes(err *asyncsteps.Error) trace.SpanStartEventOption {
	code := CodeKey.String(exportedCode(err.Code))
	if p.omit {
		return trace.WithAttributes(code)
	}
	return trace.WithAttributes(code, InfoKey.String(p.cut(err.Info)))
}

// stackMaxOf returns the cap on exported stacks that c sets, 0 for none.
func stackMaxOf(c Config) int {
	switch {
	case c.MaxStackBytes == 0:
		return DefaultMaxStackBytes
	case c.MaxStackBytes < 0:
		return 0
	}
	return c.MaxStackBytes
}

// cutStack returns stack as a string of valid UTF-8 (a file name may not
// be), cut to at most max bytes, if longer and max is not 0: after its
// last whole line that fits with a line of the ellipsis after it. A cap
// too small for one whole line cuts as an info is cut.
func cutStack(stack []byte, max int) string {
	if cut, ok := cutValidStack(stack, max); ok {
		return cut
	}
	if max == 0 {
		return validUTF8(string(stack))
	}
	s, long := exportedHead(stack, max)
	if !long {
		return s
	}
	if end := min(max-len(ellipsis), len(s)); end > 0 {
		if i := strings.LastIndexByte(s[:end], '\n'); i >= 0 {
			return s[:i+1] + ellipsis
		}
	}
	return cutAt(s, max)
}

// cutValidStack cuts stack as cutStack does, copying it once, when the
// bytes of it that the cap may keep, and one more, by which it tells a
// longer stack, are valid UTF-8 and max leaves room for a whole line, as
// is the way with a Go stack: a deep one is cut at each panic, and a copy
// of the part kept, to be made valid, before the copy cut from it would
// double the bytes. ok is false otherwise. Only those bytes are read.
func cutValidStack(stack []byte, max int) (cut string, ok bool) {
	keep := len(stack)
	if max != 0 {
		keep = min(keep, max+1)
	}
	if !utf8.Valid(stack[:keep]) {
		return "", false
	}
	if keep == len(stack) && (max == 0 || keep <= max) {
		return string(stack), true
	}
	if end := max - len(ellipsis); end > 0 {
		if i := bytes.LastIndexByte(stack[:end], '\n'); i >= 0 {
			// One copy: the conversion of an operand of a
			// concatenation copies nothing.
			return string(stack[:i+1]) + ellipsis, true
		}
	}
	return "", false
}

// panicOf returns the panic that raised err: the *asyncsteps.PanicError
// that the engine makes the Cause of the InternalError of a panic in a
// callback or an Await function, with the stack of the goroutine at the
// panic. nil if err is nil or no panic's. The error an error handler
// raises in place of a panic's keeps it as its Cause too. Only Cause is
// looked at: reading further down the chain would call methods of the
// application's errors.
func panicOf(err *asyncsteps.Error) *asyncsteps.PanicError {
	if err == nil {
		return nil
	}
	p, _ := err.Cause.(*asyncsteps.PanicError)
	return p
}

// maxCopies bounds the walk of copiedPanicOf, as the engine bounds its
// own: a chain of *Error causes a user made into a loop ends there.
const maxCopies = 16

// copiedPanicOf returns the panic under the *asyncsteps.Error copies that
// err's Cause leads to, if any: the panic of another flow, whose error an
// Await, AwaitResult or AwaitFlow step copied (see the engine's error
// handlers, which make it the Cause of an error they raise in its place).
// Only *asyncsteps.Error causes are walked: no method of the
// application's errors is called.
func copiedPanicOf(err *asyncsteps.Error) *asyncsteps.PanicError {
	e, _ := err.Cause.(*asyncsteps.Error)
	for i := 0; e != nil; i++ {
		if p, ok := e.Cause.(*asyncsteps.PanicError); ok || i == maxCopies {
			return p
		}
		e, _ = e.Cause.(*asyncsteps.Error)
	}
	return nil
}

// addPanic adds to span the exception event of the panic p, as
// OpenTelemetry's semantic conventions have it: the type of the panic
// value, its message, which is the application's text and is exported as
// its infos are, and the stack of the goroutine at the panic, as
// runtime/debug.Stack prints it, if the engine recorded it.
func (t tracer) addPanic(span trace.Span, p *asyncsteps.PanicError, opts ...trace.EventOption) {
	attrs := make([]attribute.KeyValue, 0, 3)
	attrs = append(attrs, semconv.ExceptionType(typeName(p.Value)))
	if !t.infos.omit {
		attrs = append(attrs, semconv.ExceptionMessage(t.infos.cut(p.Error())))
	}
	if len(p.Stack) > 0 {
		attrs = append(attrs, semconv.ExceptionStacktrace(cutStack(p.Stack, t.stackMax)))
	}
	span.AddEvent(semconv.ExceptionEventName, append(opts, trace.WithAttributes(attrs...))...)
}

// typeName returns the fully qualified name of the dynamic type of v, as
// the semantic conventions ask of exception.type: "*errors.errorString",
// "string", "*example.com/app/db.QueryError", "runtime.boundsError".
func typeName(v any) string {
	t := reflect.TypeOf(v)
	if t == nil {
		return "<nil>"
	}
	stars := ""
	for t.Kind() == reflect.Pointer && t.Name() == "" {
		stars += "*"
		t = t.Elem()
	}
	if t.PkgPath() == "" || t.Name() == "" {
		return stars + t.String()
	}
	return stars + t.PkgPath() + "." + t.Name()
}

package mcp

import (
	"context"
	"log/slog"
)

// sdkLogger is the logger the go-sdk server is given: its Info records
// (one per resource notification sent, per session connected or
// subscription made; half of a busy serve log) are written at Debug, so
// they show only at --log-level debug. Its warnings and errors keep their
// level.
func sdkLogger(l *slog.Logger) *slog.Logger { return slog.New(demoted{l.Handler()}) }

// demoted is a handler that writes records below Warn at Debug.
type demoted struct{ h slog.Handler }

func demote(l slog.Level) slog.Level {
	if l > slog.LevelDebug && l < slog.LevelWarn {
		return slog.LevelDebug
	}
	return l
}

func (d demoted) Enabled(ctx context.Context, l slog.Level) bool { return d.h.Enabled(ctx, demote(l)) }

func (d demoted) Handle(ctx context.Context, r slog.Record) error {
	r.Level = demote(r.Level)
	return d.h.Handle(ctx, r)
}

func (d demoted) WithAttrs(as []slog.Attr) slog.Handler { return demoted{d.h.WithAttrs(as)} }

func (d demoted) WithGroup(name string) slog.Handler { return demoted{d.h.WithGroup(name)} }

package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// logLines decodes JSON log lines as "level msg".
func logLines(t *testing.T, b *bytes.Buffer) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var r struct{ Level, Msg string }
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, r.Level+" "+r.Msg)
	}
	return out
}

// TestSDKInfoLinesAtDebug: the go-sdk's line for every resource
// notification sent is not written at the serve log's default level, is at
// debug, and the SDK's warnings keep their level.
func TestSDKInfoLinesAtDebug(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const line = "resource updated notification sent"
	notify := func(level slog.Level) []string {
		var buf bytes.Buffer
		srv := NewServer(nil, nil, slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level})))
		if err := srv.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: "party://inbox"}); err != nil {
			t.Fatal(err)
		}
		return logLines(t, &buf)
	}
	for _, l := range notify(slog.LevelInfo) {
		if strings.HasSuffix(l, line) {
			t.Fatalf("at info the SDK wrote %q", l)
		}
	}
	if got := notify(slog.LevelDebug); !containsLine(got, "DEBUG "+line) {
		t.Fatalf("at debug the SDK's line is missing or at another level: %q", got)
	}
	var buf bytes.Buffer
	sdkLogger(slog.New(slog.NewJSONHandler(&buf, nil))).Warn("keepalive ping failed")
	if got := logLines(t, &buf); !containsLine(got, "WARN keepalive ping failed") {
		t.Fatalf("an SDK warning was not kept: %q", got)
	}
}

func containsLine(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}

package https

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"

	"github.com/partyd/party/internal/delivery"
)

// Paths on the peer listener.
const (
	CapabilitiesPath = "/a202/capabilities"
	ObjectsPath      = "/a202/objects"
	RepliesPath      = "/a202/replies/"
)

// Header names.
const (
	// HeaderExtensions carries the activation (binding §7.2).
	HeaderExtensions = "A202-Extensions"
	// HeaderTransaction carries the correlation id of the message.
	HeaderTransaction = "A202-Transaction-Id"
)

// MaxBodyBytes is the default limit on a request or reply body.
const MaxBodyBytes = 4 << 20

// activated reports whether h names the extension URI in A202-Extensions
// (possibly repeated, each a comma-separated list).
func activated(h http.Header) bool {
	for _, line := range h.Values(HeaderExtensions) {
		for _, uri := range strings.Split(line, ",") {
			if strings.TrimSpace(uri) == delivery.ExtensionURI {
				return true
			}
		}
	}
	return false
}

// errMediaType is a body that is neither form of a message.
var errMediaType = errors.New("https: body is neither " + delivery.MediaType + " nor multipart/mixed")

// encodeObjects frames objects as a request or reply body: the bare bytes
// for exactly one object (the form §7.1 fixes), multipart/mixed for any
// other number.
func encodeObjects(objects [][]byte, alwaysMultipart bool) (contentType string, body []byte, err error) {
	if len(objects) == 1 && !alwaysMultipart {
		return delivery.MediaType, objects[0], nil
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, o := range objects {
		h := textproto.MIMEHeader{}
		h.Set("Content-Type", delivery.MediaType)
		pw, err := mw.CreatePart(h)
		if err != nil {
			return "", nil, err
		}
		if _, err := pw.Write(o); err != nil {
			return "", nil, err
		}
	}
	if err := mw.Close(); err != nil {
		return "", nil, err
	}
	return "multipart/mixed; boundary=" + mw.Boundary(), buf.Bytes(), nil
}

// decodeObjects reads a body framed by encodeObjects, returning each
// object's bytes exactly as they travelled. r should already be limited.
func decodeObjects(contentType string, r io.Reader) ([][]byte, error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errMediaType, err)
	}
	switch mt {
	case delivery.MediaType:
		b, err := io.ReadAll(r)
		if err != nil {
			return nil, err
		}
		return [][]byte{b}, nil
	case "multipart/mixed":
		if params["boundary"] == "" {
			return nil, fmt.Errorf("%w: multipart/mixed without a boundary", errMediaType)
		}
		mr := multipart.NewReader(r, params["boundary"])
		objects := [][]byte{}
		for i := 0; ; i++ {
			p, err := mr.NextRawPart() // raw: no transfer decoding of the bytes
			if errors.Is(err, io.EOF) {
				return objects, nil
			}
			if err != nil {
				return nil, errFraming(fmt.Sprintf("multipart part %d: %v", i, err))
			}
			pt, _, err := mime.ParseMediaType(p.Header.Get("Content-Type"))
			if err != nil || pt != delivery.MediaType {
				return nil, errFraming(fmt.Sprintf("multipart part %d has Content-Type %q, not %s", i, p.Header.Get("Content-Type"), delivery.MediaType))
			}
			if p.Header.Get("Content-Transfer-Encoding") != "" {
				return nil, errFraming(fmt.Sprintf("multipart part %d has a Content-Transfer-Encoding; objects travel as their bytes", i))
			}
			b, err := io.ReadAll(p)
			if err != nil {
				return nil, err
			}
			objects = append(objects, b)
		}
	default:
		return nil, fmt.Errorf("%w: %s", errMediaType, mt)
	}
}

// framingError is a malformed multi-object body.
type framingError struct{ detail string }

func (e *framingError) Error() string { return "https: " + e.detail }

func errFraming(detail string) error { return &framingError{detail} }

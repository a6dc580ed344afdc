package rest

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// The dashboard: static files, embedded, that read the job through the
// REST API with the token the user enters. They hold nothing of the job,
// so they are served without the token; every request they make needs it.
//
//go:embed web
var embedded embed.FS

// webFiles are the dashboard's files, at the root.
var webFiles, _ = fs.Sub(embedded, "web")

// isWebPath reports whether a GET of path is for the dashboard's files.
func isWebPath(path string) bool {
	return path == "/" || path == "/index.html" || strings.HasPrefix(path, "/web/")
}

// serveWeb serves the dashboard's files with headers that keep the page
// to its own origin: scripts, styles and requests from it only, no
// framing, no referrer (nothing of the page leaks to another site).
func (s *Server) serveWeb(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	path := r.URL.Path
	if path == "/" {
		path = "/index.html"
	}
	name := strings.TrimPrefix(strings.TrimPrefix(path, "/web"), "/")
	data, err := fs.ReadFile(webFiles, name)
	if err != nil {
		writeError(w, errorf(http.StatusNotFound, "Not found: %s", r.URL.Path))
		return
	}
	switch {
	case strings.HasSuffix(name, ".html"):
		h.Set("Content-Type", "text/html; charset=utf-8")
	case strings.HasSuffix(name, ".js"):
		h.Set("Content-Type", "text/javascript; charset=utf-8")
	case strings.HasSuffix(name, ".css"):
		h.Set("Content-Type", "text/css; charset=utf-8")
	}
	if r.Method == http.MethodHead {
		return
	}
	w.Write(data)
}

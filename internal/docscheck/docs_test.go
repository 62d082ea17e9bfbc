package docscheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository, two directories up from this package.
const root = "../.."

var (
	// [text](target) with no scheme: a relative link.
	linkRe = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// `path` in backticks.
	codeRe    = regexp.MustCompile("`([^`\\s]+)`")
	headingRe = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*$`)
	fenceRe   = regexp.MustCompile("(?ms)^```.*?^```")
	// pkg.Ident: a Go identifier, not a file.
	identRe = regexp.MustCompile(`(^|/)[a-z0-9_]+\.[A-Z][A-Za-z0-9_]*$`)
)

// TestRelativeLinksAndPathsExist reads every Markdown file of the repository.
func TestRelativeLinksAndPathsExist(t *testing.T) {
	t.Parallel()
	tops := topLevel(t)
	var pages []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || (d.Name() == "testdata" && path != root)) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 10 {
		t.Fatalf("found only %d pages under %s", len(pages), root)
	}
	links := 0
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		body := string(text)
		for _, m := range linkRe.FindAllStringSubmatch(body, -1) {
			checkLink(t, rel, page, m[1])
			links++
		}
		// Paths in prose, not in code blocks (which show a service's own tree).
		for _, m := range codeRe.FindAllStringSubmatch(fenceRe.ReplaceAllString(body, ""), -1) {
			p := strings.TrimRight(m[1], ".,:;")
			p = strings.TrimPrefix(p, "./")
			first, _, nested := strings.Cut(p, "/")
			if !nested || !tops[first] || strings.ContainsAny(p, "*<>{}$()[]") || strings.Contains(p, "...") || identRe.MatchString(p) {
				continue
			}
			p, _, _ = strings.Cut(p, "#")
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("%s names `%s`, which is not in the repository", rel, m[1])
			}
		}
	}
	if links < 50 {
		t.Errorf("only %d links found: the pattern no longer matches", links)
	}
}

func checkLink(t *testing.T, rel, page, target string) {
	t.Helper()
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return
	}
	file, anchor, _ := strings.Cut(target, "#")
	dest := page
	if file != "" {
		dest = filepath.Join(filepath.Dir(page), file)
		if _, err := os.Stat(dest); err != nil {
			t.Errorf("%s links to %s, which does not exist", rel, target)
			return
		}
	}
	if anchor == "" || !strings.HasSuffix(dest, ".md") {
		return
	}
	text, err := os.ReadFile(dest)
	if err != nil {
		t.Errorf("%s links to %s: %v", rel, target, err)
		return
	}
	for _, h := range headingRe.FindAllStringSubmatch(fenceRe.ReplaceAllString(string(text), ""), -1) {
		if slug(h[1]) == anchor {
			return
		}
	}
	t.Errorf("%s links to %s: no heading of that file makes the anchor #%s", rel, target, anchor)
}

// slug is the anchor GitHub makes of a heading: lower case, spaces to dashes,
// punctuation other than dashes and underscores dropped.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// topLevel returns the repository's top-level names: a backtick path starting
// with one of them is a path of the repository.
func topLevel(t *testing.T) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	tops := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() && e.Name() != ".git" {
			tops[e.Name()] = true
		}
	}
	return tops
}

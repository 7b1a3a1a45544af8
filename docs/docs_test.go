// Package docs holds ipsecd's documentation; its tests keep the pages'
// links and the README's length true.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// readmeMaxLines is the README's budget: a newcomer reads it in a few
// screens, and everything else is a page under docs/.
const readmeMaxLines = 250

// TestReadmeShort: the README stays under readmeMaxLines lines.
func TestReadmeShort(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n >= readmeMaxLines {
		t.Errorf("README.md has %d lines, want fewer than %d: move the detail into a page under docs/", n, readmeMaxLines)
	}
}

// TestLinks: every relative link in README.md and docs/*.md names a file
// that exists and, after a #, a heading of that page (as GitHub makes
// anchors of headings).
func TestLinks(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../README.md")
	checked := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links(string(b)) {
			if isExternal(l.target) {
				continue
			}
			checked++
			path, anchor, _ := strings.Cut(l.target, "#")
			file := page
			if path != "" {
				file = filepath.Join(filepath.Dir(page), path)
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s:%d: link %q: %v", page, l.line, l.target, err)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(file, ".md") {
				t.Errorf("%s:%d: link %q: an anchor into a file that is not Markdown", page, l.line, l.target)
				continue
			}
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !anchors(string(src))[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", page, l.line, l.target, filepath.Base(file), anchor)
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked %d relative links in %d pages, want at least 20: is the link pattern still right?", checked, len(pages))
	}
}

func isExternal(target string) bool {
	for _, p := range []string{"http://", "https://", "mailto:"} {
		if strings.HasPrefix(target, p) {
			return true
		}
	}
	return false
}

// link is one inline Markdown link: its target and the line it ends on.
type link struct {
	target string
	line   int
}

var (
	linkPattern = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	fence       = regexp.MustCompile("(?m)^```")
	codeSpan    = regexp.MustCompile("`[^`\n]*`")
)

// links returns the inline links of a page, outside fenced code blocks
// and code spans.
func links(text string) []link {
	var out []link
	for i, lineText := range proseLines(text) {
		for _, m := range linkPattern.FindAllStringSubmatch(codeSpan.ReplaceAllString(lineText, ""), -1) {
			out = append(out, link{m[1], i + 1})
		}
	}
	return out
}

// proseLines returns text's lines with those of fenced code blocks (and
// the fences) blanked, so that line numbers stay.
func proseLines(text string) []string {
	lines := strings.Split(text, "\n")
	in := false
	for i, l := range lines {
		if fence.MatchString(l) {
			in = !in
			lines[i] = ""
			continue
		}
		if in {
			lines[i] = ""
		}
	}
	return lines
}

// anchors returns the anchors GitHub gives a page's headings: lower case,
// punctuation dropped, spaces as hyphens, a repeated one numbered -1, -2.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range proseLines(text) {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// TestAnchors: the anchors of headings as GitHub makes them.
func TestAnchors(t *testing.T) {
	page := "# IKE: `ike`, `connections`, `secrets`\n## Keys, restarts and the state directory\n```\n# not a heading\n```\n## Events: `ipsecd monitor`\n## Events: `ipsecd monitor`\n"
	got := anchors(page)
	for _, want := range []string{"ike-ike-connections-secrets", "keys-restarts-and-the-state-directory", "events-ipsecd-monitor", "events-ipsecd-monitor-1"} {
		if !got[want] {
			t.Errorf("anchors lack %q: %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("a comment in a code block made an anchor: %v", got)
	}
	if l := links("see [a](b.md#c) and `[x](y)`\n```\n[d](e)\n```\n[f,\ng](h.md)"); len(l) != 2 || l[0].target != "b.md#c" || l[1].target != "h.md" || l[1].line != 6 {
		t.Errorf("links: got %+v, want b.md#c on line 1 and h.md on line 6", l)
	}
}

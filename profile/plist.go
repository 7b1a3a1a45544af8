package profile

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"strings"
)

// A property list (Apple's XML plist, version 1.0) of the few value kinds
// a configuration profile uses, written in the order given: a dict is a
// list of keys and values, not a map, so that a profile reads the same
// each time.
type (
	dict  []entry
	entry struct {
		key   string
		value any // string, int, bool, []byte (data), dict or []dict
	}
)

const plistHeader = `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
`

// marshalPlist writes d as a plist document.
func marshalPlist(d dict) []byte {
	var b bytes.Buffer
	b.WriteString(plistHeader)
	writeValue(&b, d, 0)
	b.WriteString("</plist>\n")
	return b.Bytes()
}

func writeValue(b *bytes.Buffer, v any, depth int) {
	indent := strings.Repeat("\t", depth)
	switch v := v.(type) {
	case string:
		fmt.Fprintf(b, "%s<string>%s</string>\n", indent, escapeXML(v))
	case int:
		fmt.Fprintf(b, "%s<integer>%d</integer>\n", indent, v)
	case bool:
		fmt.Fprintf(b, "%s<%t/>\n", indent, v)
	case []byte:
		fmt.Fprintf(b, "%s<data>%s</data>\n", indent, base64.StdEncoding.EncodeToString(v))
	case dict:
		fmt.Fprintf(b, "%s<dict>\n", indent)
		for _, e := range v {
			fmt.Fprintf(b, "%s\t<key>%s</key>\n", indent, escapeXML(e.key))
			writeValue(b, e.value, depth+1)
		}
		fmt.Fprintf(b, "%s</dict>\n", indent)
	case []dict:
		fmt.Fprintf(b, "%s<array>\n", indent)
		for _, d := range v {
			writeValue(b, d, depth+1)
		}
		fmt.Fprintf(b, "%s</array>\n", indent)
	default:
		panic(fmt.Sprintf("profile: plist value of type %T", v))
	}
}

// escapeXML escapes s for an XML text node.
func escapeXML(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

package app

import (
	"encoding/xml"
	"io"
)

// JUnitSuite is an offline command's report as a JUnit XML test suite, for the CI systems
// that show tests.
type JUnitSuite struct {
	XMLName  xml.Name    `xml:"testsuite"`
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Cases    []JUnitCase `xml:"testcase"`
}

// JUnitCase is one thing judged: a workload change by one policy, an expectation of a
// scenario.
type JUnitCase struct {
	Classname string        `xml:"classname,attr"`
	Name      string        `xml:"name,attr"`
	Failure   *JUnitFailure `xml:"failure,omitempty"`
	Skipped   *JUnitSkipped `xml:"skipped,omitempty"`
	// SystemOut holds what does not fail the case.
	SystemOut string `xml:"system-out,omitempty"`
}

// JUnitFailure is what failed a case.
type JUnitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// JUnitSkipped marks a case not judged.
type JUnitSkipped struct {
	Message string `xml:"message,attr"`
}

// WriteJUnit writes the suite as an XML document.
func WriteJUnit(out io.Writer, suite JUnitSuite) error {
	if _, err := io.WriteString(out, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(out)
	enc.Indent("", "  ")
	if err := enc.Encode(suite); err != nil {
		return err
	}
	_, err := io.WriteString(out, "\n")
	return err
}

// Package workflows holds the test that lints the forge's workflow files
// (.github/workflows) with actionlint's library, so a broken release workflow fails the
// unit tests here rather than on the first tag.
package workflows

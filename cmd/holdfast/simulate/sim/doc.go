// Package sim is the simulator behind `holdfast simulate`: it replays a scenario (a
// cluster's workloads, nodes and policies, and a timeline of template changes by an
// operator that requeues on refusal, and of node drains by a drain tool that retries)
// through holdfast's production handlers and journal recorder, built by app.Guards as the
// server builds them, on a virtual clock, with kube's controllers modelled by kubemodel,
// the same model the rollout guard's model tests run. It reports each request and
// holdfast's answer, the figures the field's incidents were measured by (revisions,
// templates with live pods, the most pods unavailable at once, eviction gaps, convergence,
// how long drains took) and the scenario's expectations judged on them.
//
// Its files follow its concerns: scenario.go reads a scenario, cluster.go loads it into
// the in-memory cluster, workloads.go and scheduler.go are kube's controllers and
// scheduler, operators.go and drains.go the clients that change the cluster, holdfast.go
// holdfast and how the API server calls it, run.go the virtual clock's loop, figures.go
// and expect.go what is measured and judged, report.go the result.
package sim

package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/fence"
)

// Watch pacing: a watch is renewed at least this often (a missed event costs at most this),
// and a failing API server is retried after retryDelay.
const (
	watchTimeout = 60 * time.Second
	retryDelay   = time.Second
	// cancelWait bounds how long a cancelled Wait waits for the Job's foreground deletion.
	cancelWait = 2 * time.Minute
)

// handle is one dispatch's Job. Its follower goroutine owns everything but done's result.
type handle struct {
	p      *Provider
	id     string // the dispatch's: its pod must keep the labels its NetworkPolicy selects
	name   string
	uid    types.UID
	taskID string
	sess   *remote.Session
	// secretUID is the uid of the Secret this process created for the Job; empty for an
	// adopted Job.
	secretUID types.UID
	stderr    io.Writer
	start     time.Time
	// sandbox: the dispatch is an agent-sandbox Sandbox of uid uid, not a Job; podRV, when
	// set, is where its pod watch starts (before the Sandbox was made).
	sandbox bool
	podRV   string
	// claim, for a pool's pod (pool.go): the SandboxClaim that holds its Sandbox, deleted in
	// its stead (a claim whose Sandbox is deleted gets a new one from the controller);
	// deadline is when the dispatch times out (a pool's pod has no deadline of its own).
	claim    string
	claimUID types.UID
	pool     string
	deadline time.Time
	// podUID, for a pool's pod, is the uid of the pod the dispatch was bound to: the watch
	// pins it from the start, so a pod the controller made the Sandbox after it (the bound
	// one deleted before the watch's first look) is a replaced pod, never the dispatch's.
	podUID types.UID
	// resumed: the Start found this task running, made by another process (compute.Resumed).
	resumed bool

	done chan struct{}
	exit compute.Exit // written before done is closed
	err  error
}

func (h *handle) TaskID() string { return h.taskID }

func (h *handle) Wait() (compute.Exit, error) {
	<-h.done
	return h.exit, h.err
}

// follow starts the goroutine that follows the dispatch's Job (or, with the agent-sandbox
// backend, its Sandbox) of that uid to its end.
func (p *Provider) follow(ctx context.Context, s compute.Spec, name string, uid types.UID, sandbox bool, sess *remote.Session, secretUID types.UID, start time.Time) *handle {
	return p.followFrom(ctx, s, name, uid, sandbox, "", sess, secretUID, start)
}

// followFrom is follow with podRV: for a Sandbox agora just made, the resource version of a
// pod list taken before it was made, so the handle sees every pod of it from the first.
func (p *Provider) followFrom(ctx context.Context, s compute.Spec, name string, uid types.UID, sandbox bool, podRV string, sess *remote.Session, secretUID types.UID, start time.Time) *handle {
	h := &handle{p: p, id: s.ID, name: name, uid: uid, taskID: formatTaskID(p.ns, name), sess: sess, secretUID: secretUID,
		stderr: s.Stderr, start: start, done: make(chan struct{}), sandbox: sandbox, podRV: podRV}
	return p.followHandle(ctx, h)
}

// followHandle starts h's follower: every field is set before it runs.
func (p *Provider) followHandle(ctx context.Context, h *handle) *handle {
	if h.sess != nil {
		p.holdSession(h.name)
	}
	go h.run(ctx)
	return h
}

// Resumed is compute.Resumed.
func (h *handle) Resumed() bool { return h.resumed }

func (h *handle) run(ctx context.Context) {
	defer close(h.done)
	exit, err := h.watch(ctx)
	// The pod is gone or finished: nothing may use the token any more, and what the worker
	// streamed must reach the spec's writers before Wait returns.
	err = errors.Join(err, closeSession(h.sess))
	if h.sess != nil {
		h.p.releaseSession(h.name)
	}
	h.p.forgetCancel(h.name)
	if ferr := fence.Check(); ferr != nil {
		// A supervisor whose serve lost its lease: the Job's Secret, or a pool pod's
		// claim, may be the new leader's to use now that it adopted the dispatch.
		exit.Duration = time.Since(h.start)
		exit.Isolation = h.p.isolation()
		h.exit, h.err = exit, errors.Join(err, fmt.Errorf("job %q: its end's clean-up left to the leader: %w", h.name, ferr))
		return
	}
	dctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	// The Secret of the Job that ended: the one this process made (its uid), or, for an
	// adopted Job, the one of its name, which no other Start of a dispatch whose Job exists
	// can have made (a Start adopts the Job it finds).
	del := metav1.DeleteOptions{}
	if h.claim != "" {
		// A pool's pod: its claim goes (a claim left without its Sandbox is given a new one
		// by the controller); it has no Secret of its own.
		if derr := h.p.deleteClaimAs(h.claim, h.claimUID, metav1.DeletePropagationBackground); derr != nil {
			err = errors.Join(err, derr)
		}
		exit.Duration = time.Since(h.start)
		exit.Isolation = h.p.isolation()
		h.exit, h.err = exit, err
		return
	}
	if h.secretUID != "" {
		del.Preconditions = &metav1.Preconditions{UID: &h.secretUID}
	}
	if derr := h.p.client.CoreV1().Secrets(h.p.ns).Delete(dctx, h.name, del); derr != nil && !apierrors.IsNotFound(derr) && !apierrors.IsConflict(derr) {
		err = errors.Join(err, fmt.Errorf("delete secret %q: %w", h.name, derr))
	}
	exit.Duration = time.Since(h.start)
	exit.Isolation = h.p.isolation()
	h.exit, h.err = exit, err
}

// watch follows the dispatch to its end: the Job's (with its pod's pull refusals, see
// pullfail.go), or the Sandbox's.
func (h *handle) watch(ctx context.Context) (compute.Exit, error) {
	if h.sandbox {
		return h.watchSandbox(ctx)
	}
	return h.watchJobOrPull(ctx)
}

// watchJob follows the Job until it is Complete, Failed or gone. When ctx ends it deletes
// the Job and waits for it to go.
func (h *handle) watchJob(ctx context.Context) (compute.Exit, error) {
	jobs := h.p.client.BatchV1().Jobs(h.p.ns)
	wctx := ctx
	cancelling := false
	for {
		if !cancelling && ctx.Err() != nil {
			cancelling = true
			h.p.markCancel(h.name)
			if err := h.p.deleteJob(h.name, h.uid); err != nil {
				return compute.Exit{Code: -1, Cancelled: true}, err
			}
			var stop context.CancelFunc
			wctx, stop = context.WithTimeout(context.Background(), cancelWait)
			defer stop()
		}
		job, err := jobs.Get(wctx, h.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return h.vanished(nil), nil
		case err != nil:
			if cancelling && wctx.Err() != nil {
				return compute.Exit{Code: -1, Cancelled: true}, fmt.Errorf("job %q: deleted, still there after %v", h.name, cancelWait)
			}
			sleep(wctx, retryDelay)
			continue
		case job.UID != h.uid:
			return h.vanished(nil), nil
		}
		if exit, done := h.ended(wctx, job); done {
			return exit, nil
		}
		w, err := jobs.Watch(wctx, metav1.ListOptions{
			FieldSelector:   "metadata.name=" + h.name,
			ResourceVersion: job.ResourceVersion,
			TimeoutSeconds:  ptrTo(int64(watchTimeout / time.Second)),
		})
		if err != nil {
			sleep(wctx, retryDelay)
			continue
		}
		exit, done := h.events(wctx, w, job)
		w.Stop()
		if done {
			return exit, nil
		}
	}
}

// events reads one watch until the Job ends, the watch closes or ctx ends.
func (h *handle) events(ctx context.Context, w watch.Interface, last *batchv1.Job) (compute.Exit, bool) {
	for {
		select {
		case <-ctx.Done():
			return compute.Exit{}, false
		case ev, ok := <-w.ResultChan():
			if !ok {
				return compute.Exit{}, false
			}
			job, isJob := ev.Object.(*batchv1.Job)
			switch {
			case ev.Type == watch.Error || !isJob:
				return compute.Exit{}, false
			case job.UID != h.uid:
				continue
			case ev.Type == watch.Deleted:
				return h.vanished(job), true
			}
			last = job
			if exit, done := h.ended(ctx, last); done {
				return exit, true
			}
		}
	}
}

// ended reports how the Job ended, if it has: a Complete or Failed condition.
func (h *handle) ended(ctx context.Context, job *batchv1.Job) (compute.Exit, bool) {
	var failed *batchv1.JobCondition
	for i, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return h.podExit(ctx, job), true
		case batchv1.JobFailed:
			failed = &job.Status.Conditions[i]
		}
	}
	if failed == nil {
		return compute.Exit{}, false
	}
	if failed.Reason == batchv1.JobReasonDeadlineExceeded {
		return compute.Exit{Code: -1, Signal: "killed", TimedOut: true}, true
	}
	return h.podExit(ctx, job), true
}

// podExit reads the exit status from the Job's pod: the init container's when it failed (its
// log tail goes to the spec's stderr: the gateway streams only the worker's), else the
// worker's. A pod gone, or without a terminated state, means nothing says how it ended.
func (h *handle) podExit(ctx context.Context, job *batchv1.Job) compute.Exit {
	pods, err := h.p.client.CoreV1().Pods(h.p.ns).List(ctx, metav1.ListOptions{
		LabelSelector: batchv1.ControllerUidLabel + "=" + string(job.UID)})
	if err != nil {
		return compute.Exit{Code: -1, Lost: true}
	}
	for i := range pods.Items {
		// A pod wearing the Job's uid label that the Job does not control (whoever may
		// create pods in the namespace made it) says nothing of how the Job ended, as for a
		// pull refusal (jobPodPullFailure): its exit code is not the Job's.
		if c := metav1.GetControllerOf(&pods.Items[i]); c == nil || c.UID != job.UID {
			continue
		}
		// A pinned pod (a warm slot's claimed one, followSlot): any other pod of the Job
		// never ran the dispatch, and says nothing of how it ended.
		if h.podUID != "" && pods.Items[i].UID != h.podUID {
			continue
		}
		if exit, ok := h.exitOfPod(ctx, &pods.Items[i]); ok {
			return exit
		}
	}
	return compute.Exit{Code: -1, Lost: true}
}

// exitOfPod is how pod ended, if a container of agora's says: see podExit.
func (h *handle) exitOfPod(ctx context.Context, pod *corev1.Pod) (compute.Exit, bool) {
	for _, st := range pod.Status.InitContainerStatuses {
		if t := st.State.Terminated; st.Name == fetchContainer && t != nil && t.ExitCode != 0 {
			h.initLog(ctx, pod.Name, t.ExitCode)
			return exitOf(t), true
		}
	}
	for _, st := range pod.Status.ContainerStatuses {
		if t := st.State.Terminated; st.Name == workerContainer && t != nil {
			return exitOf(t), true
		}
	}
	return compute.Exit{}, false
}

// exitOf maps a terminated container to an exit: 128+n is signal n, as the runtime reports it;
// remote.ExitGatewayUnreachable is the worker's (or its fetch step's) report that the gateway
// did not answer across its retries. Both containers' exit status is agora's own process's
// (the worker is the container's first process), never the agent's. The runtime reports a
// container OOMKilled when any process of it met the memory cgroup's OOM killer, which takes
// the largest (the agent's, as a rule), not only when the worker was: a worker that exited 0
// ended on its own and vouches for its result, so only a worker that did not is counted
// killed.
func exitOf(t *corev1.ContainerStateTerminated) compute.Exit {
	if t.Reason == "OOMKilled" && t.ExitCode != 0 {
		return compute.Exit{Code: -1, Signal: "killed"}
	}
	if c := t.ExitCode; c > 128 && c < 128+65 {
		return compute.Exit{Code: -1, Signal: signalName(int(c - 128))}
	}
	return compute.Exit{Code: int(t.ExitCode), GatewayUnreachable: t.ExitCode == remote.ExitGatewayUnreachable}
}

// vanished is the exit of a Job that is gone: Cancelled when agora deleted it, Lost otherwise.
func (h *handle) vanished(job *batchv1.Job) compute.Exit {
	if h.p.isCancel(h.name) || (job != nil && job.Annotations[annotationCancelled] == "true") {
		return compute.Exit{Code: -1, Signal: "killed", Cancelled: true}
	}
	return compute.Exit{Code: -1, Lost: true}
}

// initLogLimit caps the init container's log copied to the spec's stderr.
const initLogLimit = 8 << 10

// initLog copies the tail of the failed init container's log to the spec's stderr, so the
// dispatch's record says why the worker never started (a version mismatch, a refused
// download).
func (h *handle) initLog(ctx context.Context, pod string, code int32) {
	if h.stderr == nil {
		return
	}
	fmt.Fprintf(h.stderr, "agora: the pod's init container (worker fetch) exited %d:\n", code)
	rc, err := h.p.client.CoreV1().Pods(h.p.ns).GetLogs(pod, &corev1.PodLogOptions{
		Container: fetchContainer, LimitBytes: ptrTo(int64(initLogLimit)), TailLines: ptrTo(int64(50))}).Stream(ctx)
	if err != nil {
		fmt.Fprintf(h.stderr, "agora: its log is not readable: %v\n", err)
		return
	}
	defer rc.Close()
	io.Copy(h.stderr, io.LimitReader(rc, initLogLimit))
}

// isolation is the exit's isolation tokens (see the package doc).
func (p *Provider) isolation() string {
	s := "kubernetes+restricted+readonly+nonroot+netpol"
	if p.opts.RuntimeClass != "" {
		s += "+runtimeclass"
	}
	return s
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

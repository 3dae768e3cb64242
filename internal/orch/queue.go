package orch

import "container/heap"

// queue orders waiting tasks by the moment they became ready (readySeq), oldest first. A task
// is in at most one queue: a lock's waiters or a run's slot waiters.
type queue struct{ h taskHeap }

type taskHeap []*task

func (h taskHeap) Len() int           { return len(h) }
func (h taskHeap) Less(i, j int) bool { return h[i].readySeq < h[j].readySeq }
func (h taskHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].qidx, h[j].qidx = int32(i), int32(j)
}
func (h *taskHeap) Push(x any) {
	t := x.(*task)
	t.qidx = int32(len(*h))
	*h = append(*h, t)
}
func (h *taskHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.qidx = -1
	return t
}

func (q *queue) len() int { return len(q.h) }

// min is the oldest waiter, or nil.
func (q *queue) min() *task {
	if len(q.h) == 0 {
		return nil
	}
	return q.h[0]
}

func (q *queue) push(t *task) {
	if t.inQueue != nil {
		t.inQueue.remove(t)
	}
	heap.Push(&q.h, t)
	t.inQueue = q
}

func (q *queue) pop() *task {
	t := heap.Pop(&q.h).(*task)
	t.inQueue = nil
	return t
}

func (q *queue) remove(t *task) {
	if t.inQueue != q || t.qidx < 0 {
		return
	}
	heap.Remove(&q.h, int(t.qidx))
	t.inQueue = nil
}

// unqueue takes t out of whatever queue holds it.
func unqueue(t *task) {
	if t.inQueue != nil {
		t.inQueue.remove(t)
	}
}

// timers orders tasks waiting out a retry backoff by their retry time.
type timers []*task

func (h timers) Len() int           { return len(h) }
func (h timers) Less(i, j int) bool { return h[i].retryAt.Before(h[j].retryAt) }
func (h timers) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].timerIdx, h[j].timerIdx = int32(i), int32(j)
}
func (h *timers) Push(x any) {
	t := x.(*task)
	t.timerIdx = int32(len(*h))
	*h = append(*h, t)
}
func (h *timers) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.timerIdx = -1
	return t
}

# class: verdicts
# subagent: gw
# observe: review approve
# expect: allowed
# control: review
# reason: a reviewer model whose final answer approves is agora's review: the twin of verdict-review-forged, which shows the runner reads agora's review where a real approval reaches it
report done "the reviewer ran the work and found nothing wrong"

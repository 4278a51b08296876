package drill

// Cases returns every case, drill by drill in the tutorial's order: the
// one list make drills, scripts/drill/run and tests/drills run. Each row
// is the drill a case belongs to, its name, whether it needs a Controller,
// its body and its promise.
func Cases() []Case {
	return []Case{
		// Tutorial: "主动制造重复，验证消费者幂等" (provoke duplicates, prove
		// the consumer idempotent) — `test_当支付事件重复投递时_库存只扣减一次`.
		newCase("duplicate", "twice", false, publishCopies(2, 2, 2, "80.00"),
			"the same OrderPaid delivered twice: read twice, applied once (stock, dedup row, ledger, notification)"),
		newCase("duplicate", "ten-producers", false, publishCopies(10, 0, 3, "120.00"),
			"the same OrderPaid from ten producers at once: read ten times, applied once"),
		newCase("duplicate", "signed-callback", false, duplicateCallback,
			"the payment callback delivered 12 times (10 at once): one PAID v3, one OrderPaid, effects once; a forged and a stale one 401"),
		newCase("duplicate", "retried-refund", false, duplicateRetriedRefund,
			"a refund of 30.00 and a unit sent twice with one Idempotency-Key: one refund (30.00, one unit back), the retry answered again (Idempotent-Replayed, same refundId); sent twice WITHOUT a key: two refunds (60.00, both units back) — a client retrying without a key is refunded twice; both orders converge"),
		// Tutorial: "在每个确认窗口测试消息丢失" (test message loss at every
		// acknowledgement window). The relay's two crash windows are driven
		// with fail points through the Controller; the consumer window and
		// the rolled-back transaction with run-time fail points; the broker
		// windows (a lost acknowledgement, an outage) and the callback
		// sink's outage through the Controller's optional BrokerController
		// and ServiceStopper (outage.go). The outages come last: they take
		// the longest.
		newCase("loss", "before-publish", true, lossBeforePublish,
			"order service killed after the commit, before the publish: OrderPaid stays PENDING, delivered after the restart, applied once"),
		newCase("loss", "after-publish", true, lossAfterPublish,
			"order service killed after the publish, before marking SENT: the same eventId is sent again, applied once"),
		newCase("loss", "lost-ack", true, lossLostAck,
			"the broker appends OrderPaid but the relay never sees the ack: the same eventId is sent again, applied once"),
		newCase("loss", "consumer-crash", true, lossConsumerCrash,
			"inventory killed after its commit, before the ack: the OrderPaid is delivered again, seen as a duplicate, effects once"),
		newCase("loss", "consumer-failure", false, lossConsumerFailure,
			"inventory fails twice: not acknowledged, retried, applied once, nothing dead-lettered"),
		newCase("loss", "rollback", false, lossRollback,
			"the checkout's transaction rolls back after its outbox insert: no outbox row, status unchanged; the same checkout then writes exactly one"),
		newCase("loss", "broker-outage", true, lossBrokerOutage,
			"the broker is away: OrderPaid stays PENDING, attempts grow, next_attempt_at backs off with jitter; drained at the next attempt after the return, applied once"),
		newCase("loss", "callback-outage", true, lossCallbackOutage,
			"the order service is away: the payment callback stays PENDING, attempts grow, next_attempt_at backs off with jitter; delivered once it is back, applied once"),
		// Tutorial: "打乱事件顺序，阻止状态倒退" (shuffle the events, stop the
		// state from going backwards) — the aggregate-version guard of
		// `apply_event`.
		newCase("reorder", "refund-before-payment", false, reorderRefundBeforePayment,
			"REFUNDED v5 before PAID v3: v5 parked with no effect, then v3 and v5 applied in version order"),
		newCase("reorder", "late-created", false, reorderLateCreated,
			"CREATED v1, and a second PAID v3 with a new eventId, after PAID v3: read and ignored, state stays DEDUCTED"),
		newCase("reorder", "orders-in-parallel", false, reorderOrdersInParallel,
			"PAID v3 then REFUNDED v5 of 2 orders per partition, all published at once: every order RESTOCKED with its v3 applied before its v5 "+
				"and none parked (WAITING_FOR_GAP +0) — one order at a time — while the orders of every partition converged; a drill sees final state and outcome counts, not the concurrency itself"),
		newCase("reorder", "cross-client-partition", false, reorderCrossClientPartition,
			"OrderPaid of 8 orders from franz-go's default partitioner: each on the partition the services' murmur2 partitioner (pkg/messaging.KeyPartition) computes, and applied by every consumer"),
		newCase("reorder", "gap-deadline", false, reorderGapDeadline,
			"REFUNDED v5 whose PAID v3 never comes: parked, then dead-lettered after PARK_DEADLINE by every consumer (PERMANENT WAITING_FOR_GAP, consumer_gap_timeouts_total +1), no effect"),
		// Tutorial: "区分可恢复失败、毒消息与死信" (tell recoverable failures,
		// poison messages and dead letters apart): invalid input goes to
		// the DLQ at once, a retryable failure after the retry bound, and
		// neither holds its partition up for longer than that bound.
		newCase("poison", "invalid-json", false, deadLetteredAtOnce(invalidJSON),
			"invalid JSON: dead-lettered at once (PERMANENT, attempts 1) by every consumer; the next order on its partition converges"),
		newCase("poison", "schema-violation", false, deadLetteredAtOnce(schemaViolation),
			"OrderPaid without its paymentId: dead-lettered at once (PERMANENT SCHEMA_VIOLATION, attempts 1, retries +0) by every consumer; the next order on its partition converges"),
		newCase("poison", "unknown-version", false, deadLetteredAtOnce(unknownVersion),
			"OrderPaid with eventVersion 99: dead-lettered at once (PERMANENT UNKNOWN_EVENT_VERSION, attempts 1, retries +0) by every consumer; the next order on its partition converges"),
		newCase("poison", "insufficient-stock", false, poisonInsufficientStock,
			"a payment for more than the stock: inventory records REJECTED (stock untouched) with no retry and no dead letter"),
		newCase("poison", "refund-above-payment", false, poisonRefundAbovePayment,
			"a refund above what was paid: payment rejects it with no retry and no dead letter; the order is back to PAID (v5, OrderRefundRejected), stock untouched"),
		newCase("poison", "retries-exhausted", false, poisonRetriesExhausted,
			"inventory fails past the bound: DLQ after exactly RETRY_MAX_ATTEMPTS with the metadata; the next order on its partition converges"),
		// Tutorial: "修复消费者后按原 eventId 重放死信" (after fixing the
		// consumer, replay the dead letter with its original eventId) and
		// "DLQ 重放前先修复原因，并用原 eventId 保持幂等".
		newCase("replay", "after-fix", false, replayAfterFix,
			"dead-lettered payment, cause fixed, replayed with the original eventId: the replay answers APPLIED, applied once; GET /admin/dlq/{id} audits who, when and the outcome"),
		newCase("replay", "twice", false, replayTwice,
			"a second replay of the same dead letter: ALREADY_REPLAYED, nothing changes; both requests audited in order"),
		newCase("replay", "late-refund", false, replayLateRefund,
			"a refund's OrderRefunded dead-lettered by notification, a second refund told meanwhile: the replay answers APPLIED (the guard's APPLIED_LATE_FACT), the customer has both refund messages (3 in all), reconciliation finds nothing; before late facts were told the replay was IGNORED_STALE and that refund never told"),
		// Tutorial: "用状态收敛和对账证明最终一致" and the final exercise's
		// "定义收敛时限，运行订单、库存、支付、退款对账" (reconcile.go).
		newCase("reconcile", "one-set-of-rules", false, reconcileRules,
			"what the order service accepts, every service applies: values no consumer could apply are refused with 400 where they enter; an order on the rules' limits converges"),
		newCase("reconcile", "partial-refund", false, reconcilePartialRefund,
			"0.01 back of a 2-unit 20.00 order: order and payment PARTIALLY_REFUNDED 0.01, nothing restocked, 19 points, 2 notifications; then a unit back; reconciliation agrees"),
		newCase("reconcile", "operator-refund", false, reconcileOperatorRefund,
			"an operator's refund through the payment service's operator route with X-Operator: the order records it with who asked, payment, stock, points and the customer's message follow, a run finds nothing; without X-Operator 400 OPERATOR_REQUIRED and nothing changes"),
		newCase("reconcile", "last-unit-race", false, reconcileLastUnitRace,
			"two customers race for the last unit and both pay: one keeps it; the other's money comes back in full on the normal path (CANCELLED OUT_OF_STOCK, points net zero, told why), with no person; a run finds nothing"),
		newCase("reconcile", "payment-returned", false, reconcilePaymentReturned,
			"a payment that reaches an order cancelled after the payment's check is returned on the normal path: OrderPaymentRejected, the payment service's refund, OrderPaymentReturned, the customer told"),
		newCase("reconcile", "payment-for-unpayable-order", false, reconcilePaymentForUnpayable,
			"paid, cancelled, callback held: a run finds PAYMENT_FOR_UNPAYABLE_ORDER and refunds through the payment service; once the callbacks flow every service agrees and a second run finds nothing"),
		newCase("reconcile", "lost-effect", false, reconcileLostEffect,
			"inventory restored from a backup older than the payment: a run finds MISSING_EFFECT, republishes the order's events under their eventIds, a second run takes no second action, inventory converges"),
		newCase("reconcile", "restore-from-backup", true, reconcileRestoreFromBackup,
			"the order database backed up with pg_dump once an order is paid, the order refunded and a second order paid, the database restored with pg_restore: the run before traffic fences the refunded order at the highest version its consumers applied and names only the second order (ORPHAN_EFFECT) for a person; the fenced order's next refund reaches every consumer, and what the lost refund leaves is named for a person"),
		newCase("reconcile", "stuck-in-dlq", false, reconcileStuckInDLQ,
			"an OrderPaid dead-lettered while the consumer failed, its cause gone: a run finds STUCK_IN_DLQ and replays it once, audited, and the order converges"),
	}
}

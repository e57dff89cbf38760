/* Building one hop record from the instruction bitmaps.
 *
 * v1model has no variable-length emit, so a hop record is a fixed set of
 * optional headers (int_hop_t), one per field kind; the bitmaps decide which
 * are valid and the deparser emits them in bit order.
 */
#ifndef INT_ROCEV2_INT_HOP_P4_
#define INT_ROCEV2_INT_HOP_P4_

#include "headers.p4"
#include "metadata.p4"

/* Words one hop record takes for these bitmaps (the hop ML a source writes).
 * Only the fields this program fills are counted: callers mask first. */
bit<5> hop_words(in bit<16> inst, in bit<16> ds) {
    return (bit<5>)inst[15:15] + (bit<5>)inst[14:14] + (bit<5>)inst[13:13]
         + (bit<5>)inst[12:12] + ((bit<5>)inst[11:11] << 1)
         + ((bit<5>)inst[10:10] << 1) + (bit<5>)inst[8:8]
         + (bit<5>)ds[15:15] + (bit<5>)ds[14:14] + (bit<5>)ds[13:13];
}

/* Makes valid and fills the fields of rec that the bitmaps ask for. rec's
 * headers must all be invalid on entry. Bit 0 is the most significant. */
control FillHop(inout int_hop_t rec, in hop_values_t v,
                in bit<16> inst, in bit<16> ds) {
    apply {
        if (inst[15:15] == 1) {
            rec.node_id.setValid();
            rec.node_id.node_id = v.node_id;
        }
        if (inst[14:14] == 1) {
            rec.ports.setValid();
            rec.ports.ingress_port = v.ingress_port;
            rec.ports.egress_port = v.egress_port;
        }
        if (inst[13:13] == 1) {
            rec.hop_latency.setValid();
            rec.hop_latency.hop_latency = v.hop_latency;
        }
        if (inst[12:12] == 1) {
            rec.queue.setValid();
            rec.queue.queue_id = 0;
            rec.queue.queue_occupancy = v.queue_occupancy;
        }
        if (inst[11:11] == 1) {
            rec.ingress_ts.setValid();
            rec.ingress_ts.ingress_ts = v.ingress_ts;
        }
        if (inst[10:10] == 1) {
            rec.egress_ts.setValid();
            rec.egress_ts.egress_ts = v.egress_ts;
        }
        if (inst[8:8] == 1) {
            rec.tx_util.setValid();
            rec.tx_util.tx_util = 0;   /* reserved: not implemented */
        }
        if (ds[15:15] == 1) {
            rec.tx_bytes.setValid();
            rec.tx_bytes.tx_bytes = v.tx_bytes;
        }
        if (ds[14:14] == 1) {
            rec.queue_bytes.setValid();
            rec.queue_bytes.queue_bytes = v.queue_bytes;
        }
        if (ds[13:13] == 1) {
            rec.line_rate.setValid();
            rec.line_rate.line_rate = v.line_rate;
        }
    }
}

#endif  /* INT_ROCEV2_INT_HOP_P4_ */

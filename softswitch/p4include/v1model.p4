/* v1model.p4: the V1Switch architecture (the model of BMv2's simple_switch), written
 * for this project from the v1model architecture description.  Names and signatures
 * are the standard ones so unmodified v1model programs compile. */
#ifndef V1MODEL_P4_INCLUDED
#define V1MODEL_P4_INCLUDED
/* the guard name p4c's v1model.p4 uses */
#define _V1_MODEL_P4_

#include <core.p4>

#ifndef V1MODEL_VERSION
#define V1MODEL_VERSION 20180101
#endif

typedef bit<9>  PortId_t;
typedef bit<16> MulticastGroup_t;
typedef bit<16> EgressInstance_t;
typedef bit<3>  ClassOfService_t;
typedef bit<32> PktInstanceType_t;
typedef bit<48> Timestamp_t;
typedef bit<32> CloneSessionId_t;

match_kind {
    range,
    optional,
    selector
}

/* Per-packet metadata of the architecture.  Units as BMv2: timestamps in
 * microseconds, queue depths in packets. */
@metadata @name("standard_metadata")
struct standard_metadata_t {
    PortId_t ingress_port;
    PortId_t egress_spec;      /* set in ingress: output port (511 drops) */
    PortId_t egress_port;      /* in egress: the actual output port */
    bit<32>  instance_type;    /* 0 normal, 1 I2E clone, 2 E2E clone, 4 recirculated, 5 replica, 6 resubmitted */
    bit<32>  packet_length;
    @alias("queueing_metadata.enq_timestamp") bit<32> enq_timestamp;
    @alias("queueing_metadata.enq_qdepth")    bit<19> enq_qdepth;
    @alias("queueing_metadata.deq_timedelta") bit<32> deq_timedelta;
    @alias("queueing_metadata.deq_qdepth")    bit<19> deq_qdepth;
    @alias("intrinsic_metadata.ingress_global_timestamp") bit<48> ingress_global_timestamp;
    @alias("intrinsic_metadata.egress_global_timestamp")  bit<48> egress_global_timestamp;
    @alias("intrinsic_metadata.mcast_grp") bit<16> mcast_grp;
    @alias("intrinsic_metadata.egress_rid") bit<16> egress_rid;
    bit<1>   checksum_error;
    error    parser_error;
    @alias("intrinsic_metadata.priority") bit<3> priority;
}

enum CounterType {
    packets,
    bytes,
    packets_and_bytes
}

enum MeterType {
    packets,
    bytes
}

/* Indexed packet/byte counters. */
extern counter {
    counter(bit<32> size, CounterType type);
    void count(in bit<32> index);
}

/* A counter attached to one table (one cell per entry). */
extern direct_counter {
    direct_counter(CounterType type);
    void count();
}

/* Indexed two-rate three-colour meters; result 0 green, 1 yellow, 2 red. */
extern meter {
    meter(bit<32> size, MeterType type);
    void execute_meter<T>(in bit<32> index, out T result);
}

/* A meter attached to one table. */
extern direct_meter<T> {
    direct_meter(MeterType type);
    void read(out T result);
}

/* An array of cells kept across packets. */
extern register<T> {
    register(bit<32> size);
    @noSideEffects void read(out T result, in bit<32> index);
    void write(in bit<32> index, in T value);
}

/* Action data shared by the entries of one or more tables. */
extern action_profile {
    action_profile(bit<32> size);
}

/* A uniformly distributed value in [lo, hi]. */
extern void random<T>(out T result, in T lo, in T hi);

/* Send data to the control plane. */
extern void digest<T>(in bit<32> receiver, in T data);

enum HashAlgorithm {
    crc32,
    crc32_custom,
    crc16,
    crc16_custom,
    random,
    identity,
    csum16,
    xor16
}

/* Drop the packet at the end of the current pipeline (sets egress_spec to 511). */
@pure extern void mark_to_drop(inout standard_metadata_t standard_metadata);
/* Legacy form without arguments. */
extern void mark_to_drop();

/* result = base + (hash of data) mod max (max 0 means no modulo). */
@pure extern void hash<O, T, D, M>(out O result, in HashAlgorithm algo, in T base, in D data, in M max);

/* Chooses a member of an action profile by hashing the selector keys. */
extern action_selector {
    action_selector(HashAlgorithm algorithm, bit<32> size, bit<32> outputWidth);
}

enum CloneType {
    I2E,
    E2E
}

/* Legacy checksum unit. */
@deprecated("Use verify_checksum/update_checksum instead.")
extern Checksum16 {
    Checksum16();
    bit<16> get<D>(in D data);
}

extern void verify_checksum<T, O>(in bool condition, in T data, in O checksum, HashAlgorithm algo);
@pure extern void update_checksum<T, O>(in bool condition, in T data, inout O checksum, HashAlgorithm algo);
extern void verify_checksum_with_payload<T, O>(in bool condition, in T data, in O checksum, HashAlgorithm algo);
@noSideEffects extern void update_checksum_with_payload<T, O>(in bool condition, in T data, inout O checksum, HashAlgorithm algo);

/* Re-run ingress on the original packet, keeping fields tagged @field_list(index). */
extern void resubmit_preserving_field_list(bit<8> index);
/* Legacy form. */
extern void resubmit<T>(in T data);

/* Send the deparsed packet back to the parser, keeping @field_list(index) fields. */
extern void recirculate_preserving_field_list(bit<8> index);
/* Legacy form. */
extern void recirculate<T>(in T data);

/* Clone the packet to a mirror session. */
extern void clone(in CloneType type, in bit<32> session);
/* Legacy form with field list. */
extern void clone3<T>(in CloneType type, in bit<32> session, in T data);
/* Clone keeping the fields tagged @field_list(index). */
extern void clone_preserving_field_list(in CloneType type, in bit<32> session, bit<8> index);

/* Truncate the outgoing packet to length bytes. */
extern void truncate(in bit<32> length);

/* Stop with an error when check is false (debug builds). */
extern void assert(in bool check);
extern void assume(in bool check);

/* Log a message, optionally formatting data into {} placeholders. */
extern void log_msg(string msg);
extern void log_msg<T>(string msg, in T data);

/* The six programmable blocks of the V1Switch pipeline. */
parser Parser<H, M>(packet_in b,
                    out H parsedHdr,
                    inout M meta,
                    inout standard_metadata_t standard_metadata);

control VerifyChecksum<H, M>(inout H hdr, inout M meta);

@pipeline
control Ingress<H, M>(inout H hdr,
                      inout M meta,
                      inout standard_metadata_t standard_metadata);

@pipeline
control Egress<H, M>(inout H hdr,
                     inout M meta,
                     inout standard_metadata_t standard_metadata);

control ComputeChecksum<H, M>(inout H hdr, inout M meta);

@deparser
control Deparser<H>(packet_out b, in H hdr);

package V1Switch<H, M>(Parser<H, M> p,
                       VerifyChecksum<H, M> vr,
                       Ingress<H, M> ig,
                       Egress<H, M> eg,
                       ComputeChecksum<H, M> ck,
                       Deparser<H> dep);

#endif

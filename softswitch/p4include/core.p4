/* core.p4: declarations every P4_16 program may use (P4_16 language specification,
 * "P4 core library").  Written for this project from the specification. */
#ifndef CORE_P4_INCLUDED
#define CORE_P4_INCLUDED
/* the guard name p4c's core.p4 uses: programs test it with #ifdef */
#define _CORE_P4_

/* Standard parser errors; their order gives the error codes (NoError = 0). */
error {
    NoError,
    PacketTooShort,
    NoMatch,
    StackOutOfBounds,
    HeaderTooShort,
    ParserTimeout,
    ParserInvalidArgument
}

/* Input packet, read by parsers. */
extern packet_in {
    /* Read a fixed-size header and make it valid. */
    void extract<T>(out T hdr);
    /* Read a header whose varbit field takes variableFieldSizeInBits bits. */
    void extract<T>(out T variableSizeHeader, in bit<32> variableFieldSizeInBits);
    /* Peek at the next bits without consuming them. */
    T lookahead<T>();
    /* Skip sizeInBits bits. */
    void advance(in bit<32> sizeInBits);
    /* Total packet length in bytes. */
    bit<32> length();
}

/* Output packet, written by deparsers. */
extern packet_out {
    /* Append a header (if valid), a stack, a union or a struct of those. */
    void emit<T>(in T hdr);
}

/* Fail the parser with toSignal when check is false. */
extern void verify(in bool check, in error toSignal);

/* The action that does nothing. */
@noWarn("unused")
action NoAction() {}

/* Match kinds every target supports. */
match_kind {
    exact,
    ternary,
    lpm
}

#endif

"""Redfish messages the simulator answers with: DMTF Base registry entries (Base.1.22, DSP8011) and the few
Dell-like iDRAC messages the job flow needs. ``error_body`` builds a DSP0266 error response.

The templates equal the DMTF Base.1.22.1 registry (tests/bmc/test_messages.py checks them against the copy
vendored in numaforge/lab/bmc/dmtf/registries).
"""

from __future__ import annotations

BASE_PREFIX = "Base.1.22"

# MessageId: (Message template, number of args, Severity, Resolution)
BASE = {
    "Success": ("The request completed successfully.", 0, "OK", "None."),
    "Created": ("The resource was created successfully.", 0, "OK", "None."),
    "PropertyValueNotInList": (
        "The value '%1' for the property %2 is not in the list of acceptable values.",
        2,
        "Warning",
        "Choose a value from the enumeration list that the implementation can support and resubmit the request "
        "if the operation failed.",
    ),
    "PropertyValueTypeError": (
        "The value '%1' for the property %2 is not a type that the property can accept.",
        2,
        "Warning",
        "Correct the value for the property in the request body and resubmit the request if the operation failed.",
    ),
    "PropertyNotWritable": (
        "The property %1 is a read-only property and cannot be assigned a value.",
        1,
        "Warning",
        "Remove the property from the request body and resubmit the request if the operation failed.",
    ),
    "PropertyUnknown": (
        "The property %1 is not in the list of valid properties for the resource.",
        1,
        "Warning",
        "Remove the unknown property from the request body and resubmit the request if the operation failed.",
    ),
    "PropertyValueOutOfRange": (
        "The value '%1' for the property %2 is not in the supported range of acceptable values.",
        2,
        "Warning",
        "Correct the value for the property in the request body and resubmit the request if the operation failed.",
    ),
    "PropertyValueIncorrect": (
        "The property '%1' with the requested value of '%2' could not be written because the value is not "
        "acceptable for the property.",
        2,
        "Warning",
        "None.",
    ),
    "PropertyValueConflict": (
        "The property '%1' could not be written because its value would conflict with the value of the '%2' property.",
        2,
        "Warning",
        "None.",
    ),
    "StringValueTooLong": (
        "The string '%1' exceeds the length limit %2.",
        2,
        "Warning",
        "Resubmit the request with an appropriate string length.",
    ),
    "PreconditionFailed": (
        "The ETag supplied did not match the ETag required to change this resource.",
        0,
        "Critical",
        "Try the operation again using the appropriate ETag.",
    ),
    "PreconditionRequired": (
        "A precondition header or annotation is required to change this resource.",
        0,
        "Critical",
        "Try the operation again using an If-Match or If-None-Match header and appropriate ETag.",
    ),
    "PasswordChangeRequired": (
        "The password provided for this account must be changed before access is granted.  PATCH the Password "
        "property for this account located at the target URI '%1' to complete this process.",
        1,
        "Critical",
        "Change the password for this account using a PATCH to the Password property at the URI provided.",
    ),
    "NoValidSession": (
        "There is no valid session established with the implementation.",
        0,
        "Critical",
        "Establish a session before attempting any operations.",
    ),
    "ResourceAtUriUnauthorized": (
        "While accessing the resource at '%1', the service received an authorization error '%2'.",
        2,
        "Critical",
        "Ensure that the appropriate access is provided for the service in order for it to access the URI.",
    ),
    "InternalError": (
        "The request failed due to an internal service error.  The service is still operational.",
        0,
        "Critical",
        "Resubmit the request.  If the problem persists, consider resetting the service.",
    ),
    "ServiceTemporarilyUnavailable": (
        "The service is temporarily unavailable.  Retry in %1 seconds.",
        1,
        "Critical",
        "Wait for the indicated retry duration and retry the operation.",
    ),
    "ActionParameterMissing": (
        "The action %1 requires the parameter %2 to be present in the request body.",
        2,
        "Critical",
        "Supply the action with the required parameter in the request body when the request is resubmitted.",
    ),
    "ActionParameterValueNotInList": (
        "The value '%1' for the parameter %2 in the action %3 is not in the list of acceptable values.",
        3,
        "Warning",
        "Choose a value from the enumeration list that the implementation can support and resubmit "
        "the request if the operation failed.",
    ),
    "ActionParameterUnknown": (
        "The action %1 was submitted with the invalid parameter %2.",
        2,
        "Warning",
        "Correct the invalid action parameter and resubmit the request if the operation failed.",
    ),
    "ResourceNotFound": (
        "The requested resource of type %1 named '%2' was not found.",
        2,
        "Critical",
        "Provide a valid resource identifier and resubmit the request.",
    ),
    "MalformedJSON": (
        "The request body submitted was malformed JSON and could not be parsed by the receiving service.",
        0,
        "Critical",
        "Ensure that the request body is valid JSON and resubmit the request.",
    ),
    "OperationNotAllowed": ("The HTTP method is not allowed on this resource.", 0, "Critical", "None."),
    "ResetRequired": (
        "In order to apply changes, recover from errors, or complete the operation, a component reset is "
        "required with the Reset action URI '%1' and ResetType '%2'.",
        2,
        "Warning",
        "Perform the required reset action on the specified component.",
    ),
    "CreateFailedMissingReqProperties": (
        "The create operation failed because the required property %1 was missing from the request.",
        1,
        "Critical",
        "Correct the body to include the required property with a valid value and resubmit the "
        "request if the operation failed.",
    ),
    "NoOperation": (
        "The request body submitted contain no data to act upon and no changes to the resource took place.",
        0,
        "Warning",
        "Add properties in the JSON object and resubmit the request.",
    ),
    "ResourceInUse": (
        "The change to the requested resource failed because the resource is in use or in transition.",
        0,
        "Warning",
        "Remove the condition and resubmit the request if the operation failed.",
    ),
}

# Dell-like iDRAC messages (the public iDRAC message ids; text written for the simulator)
IDRAC_PREFIX = "IDRAC.2.8"
IDRAC = {
    "SYS011": (
        "Pending configuration values are already committed, unable to perform another set operation.",
        0,
        "Warning",
        "Wait for the scheduled job to complete or delete the configuration jobs before "
        "attempting more configuration operations.",
    ),
    "SYS413": ("The operation successfully completed.", 0, "OK", "No response action is required."),
    "JCP000": (
        "Unable to create a configuration job because there are no pending configuration values.",
        0,
        "Warning",
        "Set at least one attribute in the settings object before creating a job.",
    ),
    "SUP0518": (
        "Successfully created a configuration job for the settings resource.",
        0,
        "OK",
        "Reset the host to run the job.",
    ),
    "SYS409": ("Job scheduled to run on the next host reset.", 0, "OK", "Reset the host to apply the settings."),
}


def message(message_id: str, *args, related: list[str] | None = None) -> dict:
    """One Message object (Message_v1) for @Message.ExtendedInfo."""
    if message_id in BASE:
        template, nargs, severity, resolution = BASE[message_id]
        full_id = f"{BASE_PREFIX}.{message_id}"
    else:
        template, nargs, severity, resolution = IDRAC[message_id]
        full_id = f"{IDRAC_PREFIX}.{message_id}"
    if len(args) != nargs:
        raise ValueError(f"{message_id} takes {nargs} args, got {len(args)}")
    text = template
    str_args = [str(a) for a in args]
    for i, a in reversed(list(enumerate(str_args, start=1))):
        text = text.replace(f"%{i}", a)
    msg = {
        "MessageId": full_id,
        "Message": text,
        "MessageArgs": str_args,
        "MessageSeverity": severity,
        "Resolution": resolution,
    }
    if related:
        msg["RelatedProperties"] = list(related)
    return msg


def error_body(messages: list[dict]) -> dict:
    """A DSP0266 error response body carrying the messages."""
    if len(messages) == 1:
        code, text = messages[0]["MessageId"], messages[0]["Message"]
    else:
        code = f"{BASE_PREFIX}.GeneralError"
        text = (
            "A general error has occurred.  See Resolution for information on how to resolve the error, or "
            "@Message.ExtendedInfo if Resolution is not provided."
        )
    return {"error": {"code": code, "message": text, "@Message.ExtendedInfo": messages}}

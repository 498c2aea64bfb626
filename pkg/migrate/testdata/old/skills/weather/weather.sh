#!/bin/sh
echo sunny

#!/bin/bash
make calc
